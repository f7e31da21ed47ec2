"""The option types of the public API: one ``Literal`` per concept, shared by both branches."""

from __future__ import annotations

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

NORMS: tuple[Norm, ...] = ("l1", "l2", "max")
CURVE_KINDS: tuple[CurveKind, ...] = ("quantile", "interval")
REDUCTIONS: tuple[Reduction, ...] = ("mean", "sum", "none")
BIN_STRATEGIES: tuple[BinStrategy, ...] = ("uniform", "quantile")
BOOTSTRAP_METHODS: tuple[BootstrapMethod, ...] = ("plain", "bayesian")
