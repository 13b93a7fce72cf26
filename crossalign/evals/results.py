"""One result record per evaluation run, appended to a JSON-lines file (``RUN/results.jsonl``
by default): ``{eval, model, options, metrics, versions, time}``. ``compare`` reuses a record
whose (eval, options, eval version, config hash) match; ``report`` renders them."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from crossalign.checkpoint import CONFIG
from crossalign.errors import CrossalignError
from crossalign.evals.registry import (
    EvalOutput,
    Evaluation,
    evaluate,
    option_defaults,
    options_dict,
)
from crossalign.extras import installed_version
from crossalign.fileio import append_jsonl, check_writable, file_sha256, read_jsonl_lines

RESULTS = "results.jsonl"
PACKAGES = ("crossalign", "torch", "transformers", "tokenizers")


@dataclass
class ResultRecord:
    """One evaluation of one model with one set of options."""

    eval: str
    model: dict[str, Any]
    """``path`` (absolute), ``run`` (the run directory, or None) and ``config_sha256`` (of
    the run's ``config.yaml``, else of the model's ``config.json``, else None)."""
    options: dict[str, Any]
    metrics: dict[str, float]
    versions: dict[str, Any]
    """Package versions, the git commit when run from a checkout, and ``eval`` (the
    evaluation's version)."""
    time: dict[str, Any] = field(default_factory=dict)
    """``started`` (UTC, ISO 8601) and ``seconds``."""
    label: str | None = None
    """A name the record is reported under instead of ``eval`` (``compare``'s ``as:``)."""

    def to_json(self) -> dict[str, Any]:
        """The record as written to the results file."""
        out = {
            "eval": self.eval,
            "model": self.model,
            "options": self.options,
            "metrics": self.metrics,
            "versions": self.versions,
            "time": self.time,
        }
        if self.label is not None:
            out["label"] = self.label
        return out

    @property
    def place(self) -> str | None:
        """The evaluated model relative to its run (``model``, ``checkpoints/step-500``), its
        path outside a run, None without a model."""
        path, run = self.model.get("path"), self.model.get("run")
        if path is None:
            return None
        return os.path.relpath(path, run) if run else path

    def key(self) -> tuple:
        """What makes two records the same measurement: evaluation, its version, options,
        label, the model's config hash and, for a run's model, its place in the run (the
        final model or a checkpoint: they share the run's config). The reuse key of
        ``compare``; it holds no absolute path, so records copied with their run still
        match."""
        return (
            self.eval,
            self.versions.get("eval"),
            repr(sorted(self.options.items())),
            self.label,
            self.model.get("config_sha256"),
            self.place if self.model.get("run") else None,
        )


class RecordNotWritten(CrossalignError):
    """An evaluation finished but its record could not be appended (a read-only run or
    prediction directory, a full disk): carries the record and the evaluation's output, so
    the result can still be shown before the error."""

    def __init__(self, message: str, record: ResultRecord, output: EvalOutput) -> None:
        super().__init__(message)
        self.record = record
        self.output = output


def run_of(model_dir: str | Path) -> Path | None:
    """The run directory a model belongs to: ``RUN`` for ``RUN/model``,
    ``RUN/checkpoints/step-N`` or ``RUN`` itself (a directory holding ``config.yaml``)."""
    path = Path(model_dir).resolve()
    if path.parent.name == "checkpoints":
        candidate = path.parent.parent
    elif path.name == "model":
        candidate = path.parent
    else:
        candidate = path
    return candidate if (candidate / CONFIG).is_file() else None


def _is_hub_model(model: str | Path) -> bool:
    """A model named by hub id: no such local path, and the name reads as an id."""
    from crossalign.hub import is_hub_id

    return not Path(model).expanduser().exists() and is_hub_id(str(model))


def _sha256(path: Path) -> str | None:
    return file_sha256(path) if path.is_file() else None


def model_identity(model_dir: str | Path | None) -> dict[str, Any]:
    """``{path, run, config_sha256}`` of a model (all None without one); a Hugging Face hub id
    keeps its name as ``path``, with the hash of its cached ``config.json``."""
    if model_dir is None:
        return {"path": None, "run": None, "config_sha256": None}
    if _is_hub_model(model_dir):
        from crossalign.hub import cached_file

        config = cached_file(str(model_dir), "config.json")
        sha = _sha256(config) if config is not None else None
        return {"path": str(model_dir), "run": None, "config_sha256": sha}
    path = Path(model_dir).resolve()
    run = run_of(path)
    sha = _sha256(run / CONFIG) if run is not None else _sha256(path / "config.json")
    return {"path": str(path), "run": None if run is None else str(run), "config_sha256": sha}


def default_results_path(model_dir: str | Path | None, options: Any = None) -> Path:
    """Where a record goes by default: ``RUN/results.jsonl`` for a run's model, else beside
    the model (``MODEL/results.jsonl``); a hub model or a model-less evaluation writes beside
    its ``out`` or ``pred`` option, else in the working directory."""
    if model_dir is not None and not _is_hub_model(model_dir):
        run = run_of(model_dir)
        return (run if run is not None else Path(model_dir)) / RESULTS
    for name in ("out", "pred"):
        value = getattr(options, name, None)
        if value:
            value = Path(value)
            return (value if value.is_dir() or name == "out" else value.parent) / RESULTS
    return Path(RESULTS)


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def versions(evaluation: Evaluation) -> dict[str, Any]:
    """Package versions (read without importing them), Python, the git commit and the
    evaluation's version."""
    found: dict[str, Any] = {"eval": evaluation.version, "python": platform.python_version()}
    for name in PACKAGES:
        found[name] = installed_version(name)
    found["git"] = _git_commit()
    return found


def run_evaluation(
    evaluation: Evaluation,
    model_dir: str | Path | None,
    options: Any,
    *,
    results: str | Path | None | bool = None,
    label: str | None = None,
) -> tuple[ResultRecord, EvalOutput]:
    """Run ``evaluation`` (``options``: a mapping or its options dataclass) and append its
    record to ``results`` (None: the default path; False: write none). Returns the record and
    the evaluation's output (notes, files, legacy payload).

    A ``results`` file given that cannot be written is refused before the model loads; a
    record that cannot be appended once the evaluation has run (the default path in a
    read-only directory, a full disk) is a ``RecordNotWritten`` that holds the result."""
    from crossalign.models.load import model_dir as resolve_model_dir

    if results not in (None, True, False):
        check_writable(results, "--results", append=True)
    opts = evaluation.build_options(options)
    model = None if model_dir is None else resolve_model_dir(model_dir)
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    out = evaluate(evaluation, model, opts)
    record = ResultRecord(
        eval=evaluation.name,
        model=model_identity(model),
        options=options_dict(opts),
        metrics={k: float(v) for k, v in out.metrics.items()},
        versions=versions(evaluation),
        time={
            "started": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
            "seconds": round(time.perf_counter() - t0, 3),
        },
        label=label,
    )
    if results is not False:
        path = default_results_path(model, opts) if results in (None, True) else Path(results)
        try:
            append_jsonl(path, record.to_json())
        except (OSError, CrossalignError) as e:
            why = (e.strerror if isinstance(e, OSError) else None) or str(e)
            raise RecordNotWritten(
                f"{evaluation.name} finished, but its record was not written: cannot append to "
                f"{path} ({why}); point --results FILE at a writable directory (or give "
                "--no-results)",
                record,
                out,
            ) from None
    return record, out


def find_record(
    records: list[ResultRecord],
    evaluation: Evaluation,
    model_dir: str | Path | None,
    options: Any,
    label: str | None = None,
) -> ResultRecord | None:
    """The latest of ``records`` that measured the same thing ``run_evaluation(evaluation,
    model_dir, options, label=label)`` would: same evaluation and version, options, label and
    model config hash; None when there is none. An option a record lacks (it was added to the
    evaluation after the record was written) counts as its default."""
    from crossalign.models.load import model_dir as resolve_model_dir

    probe = ResultRecord(
        eval=evaluation.name,
        model=model_identity(None if model_dir is None else resolve_model_dir(model_dir)),
        options=options_dict(evaluation.build_options(options)),
        metrics={},
        versions={"eval": evaluation.version},
        label=label,
    )
    key = probe.key()
    defaults = option_defaults(evaluation)

    def completed(record: ResultRecord) -> ResultRecord:
        if record.eval != evaluation.name:
            return record
        return replace(record, options={**defaults, **record.options})

    return next((r for r in reversed(records) if completed(r).key() == key), None)


def read_results(path: str | Path) -> list[ResultRecord]:
    """The records of a results file, or of ``RUN/results.jsonl`` for a directory; [] when
    there is none. A record missing a field is an error naming the file and line."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS
    records = []
    for n, (_, raw) in enumerate(read_jsonl_lines(path), 1):
        try:
            records.append(
                ResultRecord(
                    eval=raw["eval"],
                    model=raw["model"],
                    options=raw["options"],
                    metrics=raw["metrics"],
                    versions=raw["versions"],
                    time=raw.get("time", {}),
                    label=raw.get("label"),
                )
            )
        except (KeyError, TypeError):
            raise CrossalignError(
                f"{path}:{n}: not a result record (needs eval, model, options, metrics, "
                f"versions); delete or repair that line"
            ) from None
    return records
