"""A study's pre-registered hypotheses and competence gates, and their verdicts.

A study file names its hypotheses before its runs::

    hypotheses:
      - name: dwa-lowers-aer
        measures: {aer: "aer_de_en.L8/aer"}        # alias: a metric key, label.metric
        contrast: "aer(dwa) - aer(tlm) < -1"       # runs by name; + - * / and numbers
        test: welch                                # or bootstrap (non-linear contrasts)
    gates:
      - name: tagger-beats-most-frequent-tag
        measures: {sup: transfer.sup, mft: most_frequent_tag.sup}
        condition: "sup(mlm) >= mft(mlm) + 2"

A contrast ``L op R`` is tested as ``D > 0`` with ``D = L − R`` (``>``, ``>=``) or ``D = R − L``
(``<``, ``<=``), one-sided at ``alpha``. Verdicts: **MET** when ``p < alpha``; **NOT MET** when
the opposite one-sided test has ``p < alpha`` (the data show the effect is absent or smaller);
**INCONCLUSIVE** otherwise, when a run has fewer than two seeds, or when a gate fails. A gate
is judged on the means over seeds; a failed (or unmeasured) gate makes every hypothesis of its
cell that it guards (``hypotheses``; default every one) INCONCLUSIVE with the gate named —
never NOT MET on a baseline that does not function.

Measures of one run are paired by seed: a linear contrast is Welch's test over runs of each
run's per-seed combination (``crossalign.stats.linear_contrast``); ``bootstrap`` resamples
each run's seeds (``crossalign.stats.bootstrap_contrast``).
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crossalign.errors import CrossalignError
from crossalign.stats import (
    ContrastTest,
    bootstrap_contrast,
    linear_contrast,
    mean_and_variance,
)

TESTS = ("welch", "bootstrap")
MET, NOT_MET, INCONCLUSIVE = "MET", "NOT MET", "INCONCLUSIVE"


@dataclass
class Hypothesis:
    """A pre-registered hypothesis: a contrast of runs' measures and its test."""

    name: str
    """Its name in the report."""
    measures: dict[str, str]
    """Alias → metric key (``eval.metric``, or ``label.metric`` for a labelled evaluation,
    e.g. ``aer_de_en.L8/aer``). Values are in the records' units: fractions for AER,
    precision and accuracy of alignment, BLI and retrieval (one point is 0.01), percent for
    ``transfer``."""
    contrast: str
    """``L op R`` with op one of ``> >= < <=``; ``L`` and ``R`` combine ``alias(run)`` terms,
    numbers, ``+ - * /`` and parentheses, e.g. ``delta(mlm) - 2 * delta(align_mlm) > 0``."""
    test: str = "welch"
    """``welch`` (linear contrasts) or ``bootstrap`` (any contrast, e.g. a ratio)."""
    alpha: float = 0.05
    """One-sided level of the test."""
    cell: dict[str, Any] = field(default_factory=dict)
    """The matrix cell it is judged in (empty: every cell)."""
    description: str = ""
    """What it claims, in words (the paper's claim it tests)."""


@dataclass
class Gate:
    """A competence condition the runs must meet for the hypotheses to be judged."""

    name: str
    """Its name in the report."""
    measures: dict[str, str]
    """Alias → metric key, as for hypotheses."""
    condition: str
    """``L op R`` as a hypothesis's contrast, judged on the means over seeds."""
    cell: dict[str, Any] = field(default_factory=dict)
    """The matrix cell it applies to (empty: every cell)."""
    hypotheses: list[str] = field(default_factory=list)
    """The hypotheses it guards (empty: every one), e.g. a BLI word count guards the BLI
    hypotheses, not the retrieval ones."""
    description: str = ""
    """Why the baseline must meet it."""


def _divide(a: float, b: float) -> float:
    """``a / b``, NaN (not an exception) for a zero denominator."""
    return a / b if b else math.nan


_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
}
_COMPARE = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<="}

Term = tuple[str, str]
"""``(alias, run)``: one measure of one run."""


@dataclass
class Contrast:
    """A parsed ``L op R``: ``D`` (oriented so that the claim is ``D > 0``) as a function of
    its terms' values."""

    text: str
    terms: list[Term]
    """Every ``alias(run)`` it names, in order of first use."""
    d: Callable[[Sequence[float]], float]
    """``D`` of the terms' values (in ``terms`` order)."""
    op: str


def parse_contrast(
    text: str, aliases: Sequence[str], runs: Sequence[str] | None, where: str
) -> Contrast:
    """``text`` parsed into a ``Contrast``; an unknown alias, a run not in ``runs`` (None: any
    name), or any other syntax is a one-line error naming ``where``."""
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise CrossalignError(f"{where}: '{text}' is not an expression 'L op R'") from None
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _COMPARE):
        raise CrossalignError(f"{where}: '{text}' must be one comparison 'L op R' (> >= < <=)")
    terms: list[Term] = []

    def build(node: ast.AST) -> Callable[[Sequence[float]], float]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            value = float(node.value)
            return lambda _: value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = build(node.operand)
            sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
            return lambda v: sign * inner(v)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right, fn = build(node.left), build(node.right), _OPS[type(node.op)]
            return lambda v: fn(left(v), right(v))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Name)
            and not node.keywords
        ):
            alias, run = node.func.id, node.args[0].id
            if alias not in aliases:
                raise CrossalignError(
                    f"{where}: '{alias}' is not one of its measures ({', '.join(aliases)})"
                )
            if runs is not None and run not in runs:
                raise CrossalignError(f"{where}: no run '{run}' in the study ({', '.join(runs)})")
            if (alias, run) not in terms:
                terms.append((alias, run))
            index = terms.index((alias, run))
            return lambda v: v[index]
        raise CrossalignError(
            f"{where}: '{ast.unparse(node)}' in '{text}' is not a number, alias(run) or + - * /"
        )

    left, right = build(tree.left), build(tree.comparators[0])
    op = _COMPARE[type(tree.ops[0])]
    if op in (">", ">="):
        return Contrast(text, terms, lambda v: left(v) - right(v), op)
    return Contrast(text, terms, lambda v: right(v) - left(v), op)


def linear_coefficients(contrast: Contrast) -> tuple[list[float], float]:
    """``D = Σ c_i · term_i + constant``: the coefficients and the constant; a contrast that is
    not linear in its terms (checked at random points) is an error."""
    import random

    n = len(contrast.terms)
    constant = contrast.d([0.0] * n)
    coefficients = [
        contrast.d([1.0 if j == i else 0.0 for j in range(n)]) - constant for i in range(n)
    ]
    rng = random.Random(0)
    for _ in range(3):
        point = [rng.uniform(-10, 10) for _ in range(n)]
        want = constant + sum(c * x for c, x in zip(coefficients, point))
        if not math.isclose(contrast.d(point), want, rel_tol=1e-9, abs_tol=1e-9):
            raise CrossalignError(
                f"'{contrast.text}' is not linear in its measures: give it 'test: bootstrap'"
            )
    return coefficients, constant


Values = Mapping[Term, Mapping[int, float]]
"""Per ``(alias, run)``: the measure's value per seed."""


def _seeds(contrast: Contrast, values: Values) -> dict[str, list[int]]:
    """Per run: the seeds at which every one of its terms was measured."""
    out: dict[str, list[int]] = {}
    for alias, run in contrast.terms:
        seeds = set(values.get((alias, run), {}))
        out[run] = sorted(seeds if run not in out else seeds & set(out[run]))
    return out


def contrast_test(contrast: Contrast, values: Values, test: str) -> ContrastTest:
    """``contrast`` tested on ``values`` (every run needs two seeds measured on all its
    terms; else ``ValueError`` naming the run)."""
    seeds = _seeds(contrast, values)
    short = [run for run, s in seeds.items() if len(s) < 2]
    if short:
        raise ValueError(f"run '{short[0]}' has {len(seeds[short[0]])} seed(s) measured")
    runs = list(seeds)
    if test == "welch":
        coefficients, constant = linear_coefficients(contrast)
        groups = []
        for run in runs:
            per_seed = [
                sum(
                    c * values[term][s]
                    for c, term in zip(coefficients, contrast.terms)
                    if term[1] == run
                )
                for s in seeds[run]
            ]
            groups.append((1.0, per_seed))
        return linear_contrast(groups, constant)
    order = [(run, [t for t in contrast.terms if t[1] == run]) for run in runs]
    position = {term: i for i, term in enumerate(t for _, ts in order for t in ts)}

    def statistic(means: Sequence[float]) -> float:
        return contrast.d([means[position[term]] for term in contrast.terms])

    rows = [[[values[t][s] for t in ts] for s in seeds[run]] for run, ts in order]
    return bootstrap_contrast(statistic, rows)


def mean_value(contrast: Contrast, values: Values) -> float | None:
    """``D`` at the means over seeds (None when a term was not measured)."""
    means = []
    for term in contrast.terms:
        seen = list(values.get(term, {}).values())
        if not seen:
            return None
        means.append(math.fsum(seen) / len(seen))
    return contrast.d(means)


@dataclass
class GateResult:
    """A gate judged in one cell."""

    gate: Gate
    cell: dict[str, Any]
    value: float | None
    """``D`` at the means (None: not measured)."""
    passed: bool


@dataclass
class HypothesisResult:
    """A hypothesis judged in one cell."""

    hypothesis: Hypothesis
    cell: dict[str, Any]
    verdict: str
    test: ContrastTest | None
    reason: str = ""
    """Why it is INCONCLUSIVE without a test result (a failed gate, too few seeds)."""
    spread: dict[str, float] = field(default_factory=dict)
    """Per term ``alias(run)``: the standard deviation over seeds."""


def judge(test: ContrastTest, alpha: float) -> str:
    """MET (``p < alpha``), NOT MET (the opposite one-sided ``p < alpha``) or INCONCLUSIVE."""
    if test.p < alpha:
        return MET
    if test.p_opposite < alpha:
        return NOT_MET
    return INCONCLUSIVE


def _applies(cell_filter: Mapping[str, Any], cell: Mapping[str, Any]) -> bool:
    return all(cell.get(k) == v for k, v in cell_filter.items())


def _spread(contrast: Contrast, values: Values) -> dict[str, float]:
    out = {}
    for alias, run in contrast.terms:
        seen = list(values.get((alias, run), {}).values())
        if len(seen) >= 2:
            out[f"{alias}({run})"] = math.sqrt(mean_and_variance(seen)[1])
    return out


def judge_all(
    hypotheses: Sequence[Hypothesis],
    gates: Sequence[Gate],
    cells: Sequence[dict[str, Any]],
    values_of: Callable[[dict[str, Any], Mapping[str, str]], Values],
    runs: Sequence[str] | None = None,
) -> tuple[list[GateResult], list[HypothesisResult]]:
    """Every gate and hypothesis judged in every matrix cell it applies to. ``values_of(cell,
    measures)`` gives the measures' values per ``(alias, run)`` and seed in that cell; a run
    with no values (e.g. not selected) leaves its hypotheses INCONCLUSIVE and fails its
    gates. ``runs``: the study's run names, when not checked already (``check_spec``)."""
    gate_results: list[GateResult] = []
    results: list[HypothesisResult] = []
    for cell in cells:
        failed: list[Gate] = []
        for i, gate in enumerate(gates):
            if not _applies(gate.cell, cell):
                continue
            contrast = parse_contrast(gate.condition, list(gate.measures), runs, f"gates.{i}")
            value = mean_value(contrast, values_of(cell, gate.measures))
            ok = value is not None and (value > 0 if contrast.op in (">", "<") else value >= 0)
            gate_results.append(GateResult(gate, cell, value, ok))
            if not ok:
                failed.append(gate)
        for i, hyp in enumerate(hypotheses):
            if not _applies(hyp.cell, cell):
                continue
            contrast = parse_contrast(hyp.contrast, list(hyp.measures), runs, f"hypotheses.{i}")
            values = values_of(cell, hyp.measures)
            spread = _spread(contrast, values)
            try:
                test = contrast_test(contrast, values, hyp.test)
            except ValueError as e:
                results.append(HypothesisResult(hyp, cell, INCONCLUSIVE, None, str(e), spread))
                continue
            guards = [g.name for g in failed if not g.hypotheses or hyp.name in g.hypotheses]
            if guards:
                reason = f"gate failed: {', '.join(guards)}"
                results.append(HypothesisResult(hyp, cell, INCONCLUSIVE, test, reason, spread))
                continue
            results.append(HypothesisResult(hyp, cell, judge(test, hyp.alpha), test, "", spread))
    return gate_results, results


def check_spec(
    hypotheses: Sequence[Hypothesis], gates: Sequence[Gate], runs: Sequence[str]
) -> None:
    """Parse every hypothesis and gate against the study's run names (before any work)."""
    for i, hyp in enumerate(hypotheses):
        where = f"hypotheses.{i}"
        if hyp.test not in TESTS:
            raise CrossalignError(f"{where}.test: '{hyp.test}' is not one of {', '.join(TESTS)}")
        if not 0 < hyp.alpha < 1:
            raise CrossalignError(f"{where}.alpha: {hyp.alpha} is not in (0, 1)")
        contrast = parse_contrast(hyp.contrast, list(hyp.measures), runs, where)
        if hyp.test == "welch":
            try:
                linear_coefficients(contrast)
            except CrossalignError as e:
                raise CrossalignError(f"{where}: {e}") from None
    known = [h.name for h in hypotheses]
    for i, gate in enumerate(gates):
        parse_contrast(gate.condition, list(gate.measures), runs, f"gates.{i}")
        unknown = [n for n in gate.hypotheses if n not in known]
        if unknown:
            raise CrossalignError(
                f"gates.{i}.hypotheses: no hypothesis '{unknown[0]}'; the study's: "
                f"{', '.join(known) or '(none)'}"
            )
    names = [h.name for h in hypotheses] + [g.name for g in gates]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CrossalignError(f"hypotheses and gates: the name '{twice[0]}' is used twice")
