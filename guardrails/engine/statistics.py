"""Proportions with their uncertainty: the Wilson score interval.

The Wilson score interval is a few lines of arithmetic (Wilson 1927; Agresti & Coull 1998):
unlike the normal approximation it stays inside [0, 1] and behaves with few trials, which is
the common case of reviews and labels; a statistics package for this one formula is not worth
its weight. The console's quality figures (traces.review.quality), its calibration and the CI
command's labelled sets all use it.
"""

from __future__ import annotations

import math

#: The normal quantile of a 95% two-sided interval.
Z95 = 1.959963984540054


def wilson(successes: int, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of successes / trials (None without trials)."""
    if trials <= 0:
        return None
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def proportion(successes: int, trials: int) -> dict[str, object]:
    """`{"value", "interval"}`: successes / trials and its 95% Wilson interval, rounded to
    four places (both None without trials), as the API and the reports show a figure."""
    interval = wilson(successes, trials)
    return {
        "value": None if not trials else round(successes / trials, 4),
        "interval": None if interval is None else [round(interval[0], 4), round(interval[1], 4)],
    }
