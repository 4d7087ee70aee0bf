"""The noise of a median over steps: what the gate and the by-module comparison call a change within the run's
own spread. Its own module because the gate, its module rules and the comparison all read it."""

from __future__ import annotations

import math

import numpy as np

MAD_TO_SD = 1.4826  # a normal distribution's standard deviation over its median absolute deviation


def robust_noise_pct(values: np.ndarray) -> float:
    """±2 robust standard errors of the values' median, in % of it (``MAD_TO_SD`` · MAD / √n)."""
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median)))
    return 100 * 2 * MAD_TO_SD * mad / abs(median) / math.sqrt(len(values)) if median else 0.0
