"""pit_quantiles against a float64 numpy reimplementation of its documented rule.

Reference: the rule written in the docstring of ``bayescal.regression.pit_quantiles``
(right-continuous CDF, linear interpolation between predicted quantiles, the outer
level below q_1 / above q_L for ``tails="clamp"``, the outer segments extended for
``tails="linear"``), reimplemented here observation by observation in float64.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayescal.regression import pit_quantiles


def reference(y, q, levels, tails="clamp"):
    y, q, levels = (np.asarray(a, np.float64) for a in (y, q, levels))
    out = np.empty(y.shape)
    for i, yi in enumerate(y):
        qi = q[:, i]
        above = int(np.sum(qi <= yi))
        if 1 <= above <= len(levels) - 1:
            j = above - 1
            out[i] = levels[j] + (yi - qi[j]) / (qi[j + 1] - qi[j]) * (
                levels[j + 1] - levels[j]
            )
        elif tails == "clamp":
            out[i] = levels[0] if above == 0 else levels[-1]
        elif above == 0:
            w = qi[1] - qi[0]
            out[i] = 0.0 if w == 0 else levels[0] + (yi - qi[0]) / w * (levels[1] - levels[0])
        else:
            w = qi[-1] - qi[-2]
            if yi == qi[-1]:
                out[i] = levels[-1]
            else:
                out[i] = (
                    1.0 if w == 0 else levels[-1] + (yi - qi[-1]) / w * (levels[-1] - levels[-2])
                )
    return np.clip(out, 0.0, 1.0)


def test_zero_width_first_segment_is_clamped_issue_12():
    # issue 12: gave 0.5 (the zero-width segment [0, 0] read as interpolation)
    u = pit_quantiles([-1.0], [[0.0], [0.0], [1.0]], [0.1, 0.5, 0.9])
    assert float(u[0]) == pytest.approx(0.1)


@pytest.mark.parametrize("tails", ["clamp", "linear"])
def test_ties_and_tails_against_the_documented_rule(tails):
    q = np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
                  [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]])
    y = np.array([-1.0, 0.0, 1.0, 1.0, 2.0, 3.0])
    levels = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(
        np.asarray(pit_quantiles(y, q, levels, tails=tails)),
        reference(y, q, levels, tails),
        atol=1e-6,
    )


@st.composite
def cases(draw):
    # a few shapes (each new shape is one more compilation), random values
    num_levels = draw(st.sampled_from([2, 3, 6]))
    n = draw(st.sampled_from([1, 8]))
    # levels on a grid of 1/64: distinct in float32 and float64
    levels = np.sort(
        draw(st.lists(st.integers(0, 64), min_size=num_levels, max_size=num_levels, unique=True))
    ) / 64.0
    # small integer grid: many ties and zero-width segments
    steps = np.array(
        draw(st.lists(st.integers(0, 2), min_size=num_levels * n, max_size=num_levels * n))
    ).reshape(num_levels, n)
    q = np.cumsum(steps, axis=0).astype(np.float64) - 2.0
    y = np.array(draw(st.lists(st.integers(-4, 12), min_size=n, max_size=n))) / 2.0
    return y, q, levels


@settings(max_examples=150, deadline=None)
@given(cases(), st.sampled_from(["clamp", "linear"]))
def test_random_cases_match_float64_reference(case, tails):
    y, q, levels = case
    got = np.asarray(pit_quantiles(y, q, levels, tails=tails), np.float64)
    # float32 tolerance: one rounding of (y - q0) / w and of the level interpolation
    np.testing.assert_allclose(got, reference(y, q, levels, tails), atol=2e-6)
