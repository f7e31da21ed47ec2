"""Test martingales for monitoring a stream (both branches).

Vovk's Simple Jumper (Vovk, Gammerman & Shafer 2022, "Algorithmic Learning in a Random
World", 2nd ed., Alg. 8.1; crepes' ``SimpleJumper``): accounts that bet with the
factors ``1 + eps * z_t`` on each new observation, where ``E[z_t | past] = 0`` under
the null hypothesis and ``|eps z_t| <= 1``, so each account's capital is a nonnegative
martingale; after each step a fraction ``jump`` of the total is spread evenly over
the accounts again (so the mixture follows changes in which bet pays). The total
capital ``M_t`` starts at 1 and is a test martingale: by Ville's inequality
``P(sup_t M_t >= 1 / alpha) <= alpha`` under the null, at every horizon at once (an
anytime-valid test: look as often as you like).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["MartingaleResult", "simple_jumper", "check_jump", "check_epsilons"]


class MartingaleResult(NamedTuple):
    """A test martingale over a stream.

    Attributes
    ----------
    values : Array, shape [T]
        The martingale ``M_t`` after each observation (``M_0 = 1`` is not listed);
        +inf beyond the float range (a long run of evidence).
    log_values : Array, shape [T]
        ``log M_t``, kept without overflow (the recursion runs on the log scale).
    alarm : Array of int32, scalar
        The first index ``t`` with ``M_t >= 1 / level`` (the null rejected there,
        with type-I error at most ``level`` whenever one looks), or ``T`` if none.
    """

    values: jax.Array
    log_values: jax.Array
    alarm: jax.Array


def check_jump(jump: object) -> float:
    if isinstance(jump, bool) or not isinstance(jump, int | float) or not 0 < jump < 1:
        raise ValueError(f"jump must be a float in (0, 1), the jumping rate; got {jump!r}.")
    return float(jump)


def check_epsilons(epsilons: object, bound: float) -> tuple[float, ...]:
    """The accounts' bets: a non-empty sequence of floats in ``(-bound, bound)``."""
    try:
        eps = tuple(float(e) for e in np.atleast_1d(np.asarray(epsilons, dtype=float)))
    except (TypeError, ValueError):
        eps = ()
    if not eps or not all(-bound < e < bound for e in eps):
        raise ValueError(
            f"epsilons must be a non-empty sequence of floats in ({-bound:g}, {bound:g}) "
            f"(the bets); got {epsilons!r}."
        )
    return eps


def simple_jumper(
    z: jax.Array, epsilons: tuple[float, ...], jump: float, level: float, count: object = None
) -> MartingaleResult:
    """The Simple Jumper on the centred scores ``z [T]`` (``E[z_t] = 0`` under the null).

    ``count``: the real observations (a bucket's padding comes after them; an alarm
    there is no alarm)."""
    eps = jnp.asarray(epsilons, z.dtype)
    k = len(epsilons)

    # the accounts' shares of the capital (summing to 1) and the log of the total:
    # the same recursion as the capitals themselves, without overflow
    def step(carry, zt):
        share, log_total = carry
        share = share * (1 + eps * zt)
        factor = jnp.sum(share)
        log_total = log_total + jnp.log(factor)
        share = (1 - jump) * share / factor + jump / k
        return (share, log_total), log_total

    start = (jnp.full((k,), 1.0 / k, z.dtype), jnp.zeros((), z.dtype))
    _, logs = jax.lax.scan(step, start, z)
    n = logs.shape[0] if count is None else count
    crossed = (logs >= -np.log(level)) & (jnp.arange(logs.shape[0]) < n)
    alarm = jnp.where(jnp.any(crossed), jnp.argmax(crossed), n).astype(jnp.int32)
    return MartingaleResult(jnp.exp(logs), logs, alarm)
