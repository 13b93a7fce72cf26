"""Evaluations: each is registered in ``catalog`` with its options (``options``), its metrics
(direction and unit) and an implementation ``(model_dir, options) -> EvalOutput``; ``results``
runs one and appends its record (see ``registry``). Importing the package fills the registry
(the catalog imports no torch)."""

from crossalign.evals import catalog  # noqa: F401  (registers the evaluations)
