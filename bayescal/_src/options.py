"""The option types of the public API: one ``Literal`` per concept, shared by both branches."""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Any, Literal, TypeAlias

import jax

__all__ = [
    "KeyLike",
    "Norm",
    "CurveKind",
    "Reduction",
    "BinStrategy",
    "BootstrapMethod",
    "NORMS",
    "CURVE_KINDS",
    "REDUCTIONS",
    "BIN_STRATEGIES",
    "BOOTSTRAP_METHODS",
    "ErrorInterval",
    "ERROR_INTERVALS",
]

#: A PRNG key (``jax.random.key(0)``, legacy ``jax.random.PRNGKey(0)``) or an int seed.
KeyLike: TypeAlias = jax.Array | int | Any
#: How a gap between a curve and the diagonal is summarised.
Norm: TypeAlias = Literal["l1", "l2", "max"]
#: One-sided (``u <= p``) or central-interval (``|2u - 1| <= p``) calibration.
CurveKind: TypeAlias = Literal["quantile", "interval"]
#: How per-observation scores are combined.
Reduction: TypeAlias = Literal["mean", "sum", "none"]
#: Where the bins of a reliability curve go (with an int number of bins).
BinStrategy: TypeAlias = Literal["uniform", "quantile"]
#: Ordinary (resample observations) or Bayesian (Dirichlet weights) bootstrap.
BootstrapMethod: TypeAlias = Literal["plain", "bayesian"]
#: Interval of a bootstrapped calibration error: the range of the error over a
#: bootstrap confidence ball of the curve (can reach 0), or the replicates' percentiles.
ErrorInterval: TypeAlias = Literal["projection", "percentile"]

NORMS: tuple[Norm, ...] = ("l1", "l2", "max")
CURVE_KINDS: tuple[CurveKind, ...] = ("quantile", "interval")
REDUCTIONS: tuple[Reduction, ...] = ("mean", "sum", "none")
BIN_STRATEGIES: tuple[BinStrategy, ...] = ("uniform", "quantile")
BOOTSTRAP_METHODS: tuple[BootstrapMethod, ...] = ("plain", "bayesian")
ERROR_INTERVALS: tuple[ErrorInterval, ...] = ("projection", "percentile")


def coverage_and_alpha(
    coverage: Any, alpha: Any, *, default_alpha: float | None = None
) -> tuple[float, float]:
    """``(coverage, alpha)`` of an interval from whichever of the two was given.

    The one convention of the interval functions: ``coverage`` (e.g. 0.9) and ``alpha``
    (the miscoverage, 0.1) name the same interval; a call gives at most one (exactly
    one where there is no default). The complement is taken in decimal (``0.9`` gives
    ``alpha`` 0.1, not the float ``1 - 0.9 = 0.09999999999999998``), so that
    ``coverage=0.9`` and ``alpha=0.1`` give identical results, conformal ranks
    included.
    """
    import numbers

    import numpy as np

    if coverage is not None and alpha is not None:
        raise ValueError(
            f"pass coverage or alpha, not both (coverage = 1 - alpha); got "
            f"coverage={coverage!r} and alpha={alpha!r}."
        )
    if coverage is None and alpha is None:
        if default_alpha is None:
            raise TypeError(
                "give the interval's coverage (e.g. coverage=0.9) or its miscoverage "
                "alpha (e.g. alpha=0.1)."
            )
        alpha = default_alpha
    name, value = ("coverage", coverage) if coverage is not None else ("alpha", alpha)
    example = "0.9 for 90% intervals" if name == "coverage" else "0.1 for 90% intervals"
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a float in (0, 1), e.g. {example}; got "
            f"{type(value).__name__} {value!r}."
        )
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must be a float in (0, 1), e.g. {example}; got {value!r}.")
    value = float(value)
    other = _decimal_complement(value)
    return (value, other) if name == "coverage" else (other, value)


@functools.lru_cache(maxsize=256)
def _decimal_complement(value: float) -> float:
    """``1 - value`` in decimal (``0.9`` -> ``0.1``), cached: Fraction costs ~15 us."""
    return float(1 - Fraction(repr(value)))
