"""Objective weights that change during training: XLM's piecewise-linear ``lambda`` schedules.

XLM (Lample & Conneau 2019, ``src/utils.py``: ``parse_lambda_config``, ``get_lambda_value``)
writes a coefficient as ``"0:1,100000:0.1,300000:0"``: (step:value) points, the value
linearly interpolated between two points and held at the last point's value after it. Its
UNMT runs decay the denoising auto-encoder's weight this way (``--lambda_ae``). The step is
XLM's ``n_total_iter``: the training iterations done so far (a crossalign ``train.steps``
step). Plain Python: the config imports it without torch.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from crossalign.checks import check_range
from crossalign.errors import CrossalignError

EXAMPLE = "0:1,100000:0.1,300000:0"


@dataclass(frozen=True)
class WeightSchedule:
    """A piecewise-linear weight: ``points`` are (step, value) pairs, steps strictly
    increasing from 0, values >= 0. One point is a constant weight."""

    points: tuple[tuple[int, float], ...]

    @classmethod
    def constant(cls, value: float) -> WeightSchedule:
        """The schedule of a weight that never changes."""
        return cls(((0, float(value)),))

    @property
    def is_constant(self) -> bool:
        """Whether every point has the same value (the weight never changes)."""
        return len({v for _, v in self.points}) == 1

    @property
    def is_zero(self) -> bool:
        """Whether the weight is 0 at every step."""
        return all(v == 0 for _, v in self.points)

    def value(self, step: int) -> float:
        """The weight after ``step`` >= 0 training steps (XLM's ``get_lambda_value(config,
        n_iter)``): with x_a <= step < x_b the two points around it,
        y_a + (step - x_a) · (y_b - y_a) / (x_b - x_a); the last value from the last step on."""
        steps = [x for x, _ in self.points]
        i = bisect.bisect_right(steps, step) - 1
        if i < 0:
            raise ValueError(f"step {step} comes before the schedule's first point")
        if i == len(self.points) - 1:
            return self.points[-1][1]
        (x_a, y_a), (x_b, y_b) = self.points[i], self.points[i + 1]
        return y_a + (step - x_a) * float(y_b - y_a) / float(x_b - x_a)


def parse_weight(where: str, weight: float | str) -> WeightSchedule:
    """The schedule of a config weight: a number >= 0 (constant), or XLM's
    ``"STEP:VALUE,STEP:VALUE,..."`` with whole steps strictly increasing from 0 and finite
    values >= 0. A bad one is a one-line CrossalignError naming ``where`` and the fix."""
    if isinstance(weight, (int, float)) and not isinstance(weight, bool):
        check_range(where, weight, 0)
        return WeightSchedule.constant(weight)
    fix = f"write STEP:VALUE points with steps increasing from 0, e.g. '{EXAMPLE}'"
    if not isinstance(weight, str):
        raise CrossalignError(f"{where}={weight!r} must be a number >= 0 or a schedule; {fix}")
    points = []
    for item in weight.split(","):
        step, sep, value = (part.strip() for part in item.partition(":"))
        if not sep or not (step.isascii() and step.isdigit()):
            raise CrossalignError(
                f"{where}: '{item.strip()}' in '{weight}' is not STEP:VALUE; {fix}"
            )
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0:
            raise CrossalignError(
                f"{where}: the value '{value}' in '{weight}' must be a finite number >= 0"
            )
        points.append((int(step), number))
    if points[0][0] != 0:
        raise CrossalignError(f"{where}: '{weight}' starts at step {points[0][0]}; {fix}")
    for (a, _), (b, _) in zip(points, points[1:]):
        if b <= a:
            raise CrossalignError(f"{where}: in '{weight}' step {b} follows step {a}; {fix}")
    return WeightSchedule(tuple(points))
