"""Evaluations: each returns ``dict[str, float]`` and declares ``HIGHER_IS_BETTER`` per metric
(e.g. ``aer``: word alignment error rate against gold test sets read by ``gold``)."""
