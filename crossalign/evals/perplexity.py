"""Held-out perplexity of a model: masked-LM on monolingual text (``mlm_*``) and
translation-LM on sentence pairs (``tlm_*``), as the training loop measures it (fixed masking,
``crossalign.evals.heldout``).

``source: log`` reads the value the run logged (its last held-out line of ``metrics.jsonl``,
or the line at a checkpoint's step); ``source: compute`` evaluates now, on the given text or on
the run's own held-out data, which on one process reproduces the logged figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from crossalign.errors import CrossalignError
from crossalign.evals.registry import EvalOutput

if TYPE_CHECKING:
    from crossalign.config import RunConfig
    from crossalign.data.store.prepare import Sources
    from crossalign.evals.options import PerplexityOptions

PREFIX = "valid/"


def evaluate(model_dir: str, opts: PerplexityOptions) -> EvalOutput:
    """``eval perplexity``: ``mlm_ppl``, ``mlm_loss``, ``tlm_ppl`` and ``tlm_loss`` (those
    the held-out data has) of ``model_dir``, logged or computed (``opts.source``)."""
    if opts.source == "log":
        return logged_perplexity(model_dir)
    return computed_perplexity(model_dir, opts)


def logged_perplexity(model_dir: str) -> EvalOutput:
    """The held-out figures the run logged for ``model_dir``: its last held-out line for the
    run's ``model/``, the line at the checkpoint's step for ``checkpoints/step-N``."""
    from crossalign.checkpoint import checkpoint_step
    from crossalign.evals.results import run_of
    from crossalign.run_dir import METRICS, read_metrics

    run = run_of(model_dir)
    if run is None:
        raise CrossalignError(
            f"{model_dir} is not a run's model, so it has no logged perplexity; use "
            f"--source compute with --text, --pairs or --corpus"
        )
    step = checkpoint_step(Path(model_dir))
    held = [r for r in read_metrics(run) if any(k.startswith(PREFIX) for k in r)]
    if step is not None:
        held = [r for r in held if r.get("step") == step]
    if not held:
        at = f" at step {step}" if step is not None else ""
        raise CrossalignError(
            f"{run / METRICS} has no held-out line{at} (the run had no held-out data, or "
            f"train.eval_every skipped it); use --source compute"
        )
    last = held[-1]
    metrics = {k.removeprefix(PREFIX): v for k, v in last.items() if k.startswith(PREFIX)}
    return EvalOutput(metrics=metrics, notes=[f"logged in {run / METRICS} at step {last['step']}"])


def _run_config(model_dir: str) -> RunConfig | None:
    """The config of the run ``model_dir`` belongs to (None for a model outside a run)."""
    from crossalign.checkpoint import CONFIG
    from crossalign.config import load_config
    from crossalign.evals.results import run_of

    run = run_of(model_dir)
    return None if run is None else load_config(run / CONFIG)


def heldout_sources(opts: PerplexityOptions, cfg: RunConfig | None) -> Sources:
    """The held-out text to evaluate on: ``opts.text``/``opts.pairs``/``opts.corpus``'s valid
    split when given, else the run's own held-out sources."""
    from crossalign.data.corpora.files import resolve_corpus
    from crossalign.data.store.prepare import Sources, resolve_sources
    from crossalign.languages import language_file

    if opts.text or opts.pairs or opts.corpus:
        sources = Sources()
        if opts.corpus:
            found = resolve_corpus(opts.corpus)
            sources.valid_mono.update(found["valid_mono"])
            sources.valid_parallel.update(found["valid_parallel"])
        for flag, items, into in (
            ("--text", opts.text, sources.valid_mono),
            ("--pairs", opts.pairs, sources.valid_parallel),
        ):
            example = "en=valid.en" if flag == "--text" else "en-de=valid.tsv"
            for item in items or []:
                name, path = language_file(item, flag, example, pair=flag == "--pairs")
                into[name] = path
    elif cfg is not None:
        if cfg.data.store:
            raise CrossalignError(
                "the run read a token store (data.store); give the held-out text with --text, "
                "--pairs or --corpus"
            )
        run = resolve_sources(cfg.data)
        sources = Sources(valid_mono=run.valid_mono, valid_parallel=run.valid_parallel)
    else:
        raise CrossalignError(
            "the model is not a run's, so it has no held-out data of its own; give --text "
            "LANG=FILE, --pairs SRC-TGT=FILE.tsv or --corpus DIR"
        )
    if not sources.valid_mono and not sources.valid_parallel:
        raise CrossalignError("no held-out text to evaluate on; give --text, --pairs or --corpus")
    return sources


def _setting(value: Any, run_value: Any, default: Any) -> Any:
    """An option's value: given, else the run's, else the default."""
    if value is not None:
        return value
    return run_value if run_value is not None else default


def computed_perplexity(model_dir: str, opts: PerplexityOptions) -> EvalOutput:
    """Held-out loss and perplexity of ``model_dir`` evaluated now (``heldout_loss`` on one
    process) with the run's sequence length, held-out cap, masking seed and held-out
    micro-batch unless the options set them."""
    from accelerate import Accelerator

    from crossalign.data.store.prepare import cached_store, training_data
    from crossalign.data.store.token_store import open_store
    from crossalign.data.tokenizer import load_tokenizer
    from crossalign.evals.heldout import heldout_loss
    from crossalign.models.load import load_model
    from crossalign.objectives import TokenContext
    from crossalign.objectives.mlm import MaskedLM
    from crossalign.objectives.objective_set import ObjectiveSet

    cfg = _run_config(model_dir)
    sources = heldout_sources(opts, cfg)
    max_length = _setting(opts.max_length, cfg and cfg.data.max_length, 128)
    max_valid = _setting(opts.max_sequences, cfg and cfg.data.max_valid_sequences, 512)
    seed = _setting(opts.seed, cfg and cfg.train.seed, 0)
    batch = _setting(opts.batch_size, cfg and cfg.train.batch_size // cfg.train.grad_accum, 32)
    tokenizer = load_tokenizer(model_dir, "--model")
    store = open_store(cached_store(sources, tokenizer, cfg and cfg.data.cache_dir))
    data = training_data(store, tokenizer, max_length, max_valid)
    accelerator = Accelerator()  # the process's device; no autocast (exact figures)
    model = load_model(model_dir, device=str(accelerator.device))
    languages = cfg.model.language_embeddings if cfg is not None else True
    ctx = TokenContext.for_model(tokenizer, model, max_length, languages)
    module = ObjectiveSet(model, {"mlm": MaskedLM(ctx)}).to(accelerator.device)
    held = heldout_loss(accelerator, module, data, batch, seed)
    names = ", ".join(sorted(sources.valid_mono) + sorted(sources.valid_parallel))
    note = (
        f"computed on the held-out text of {names}: sequences of {max_length} tokens, at most "
        f"{max_valid} per source, masking seed {seed}, batches of {batch}"
    )
    return EvalOutput(metrics={k.removeprefix(PREFIX): v for k, v in held.items()}, notes=[note])
