"""The result type shared by every calibration curve in bayescal."""

from __future__ import annotations

from typing import NamedTuple

import jax

__all__ = ["CalibrationCurve"]


class CalibrationCurve(NamedTuple):
    """A calibration curve: expected vs observed frequencies, with weights.

    Both branches return it and the plots take it. Being a NamedTuple it is a pytree,
    so it passes through ``jax.jit`` and ``jax.vmap`` (a batch of curves is a
    ``CalibrationCurve`` whose fields have a leading batch axis).

    Attributes
    ----------
    expected : Array, shape [K]
        Nominal level (regression) or mean predicted probability per bin
        (classification).
    observed : Array, shape [K]
        Observed frequency at that level / in that bin.
    weight : Array, shape [K]
        Weight of each point in the error functionals: 1 per level for regression
        curves, the number (or total weight) of observations per bin for
        classification. Empty bins keep weight 0 so the shape stays fixed.
    lower, upper : Array or None, shape [K]
        Optional band around ``observed`` (confidence, consistency or acceptance
        band, depending on the function that filled it).
    edges : Array or None, shape [K + 1]
        The bin edges of a binned curve (``reliability_curve``); None for curves
        evaluated at levels.
    """

    expected: jax.Array
    observed: jax.Array
    weight: jax.Array
    lower: jax.Array | None = None
    upper: jax.Array | None = None
    edges: jax.Array | None = None
