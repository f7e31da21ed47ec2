"""Platt scaling: bayescal's JAX Newton solver vs scikit-learn's LogisticRegression.

Same inputs, one process; the parameters are checked to agree before anything is
timed.

- One fit on 1e6 points: ``fit_platt(y, p, soft_labels=False)`` (eager on numpy input,
  validation included, and jitted on JAX arrays) vs
  ``LogisticRegression(C=inf, solver="lbfgs")`` on the one logit feature (the same
  unpenalised maximum-likelihood problem).
- 100 fits on 1e4 points each: ``jax.vmap(fit_platt)`` over stacked data sets vs a
  Python loop over scikit-learn.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special
from _common import median_time, row
from sklearn.linear_model import LogisticRegression

from bayescal.classification import fit_platt


def _data(rng: np.random.Generator, shape: tuple[int, ...]):
    z = rng.normal(0, 1.5, size=shape)
    y = (rng.uniform(size=shape) < scipy.special.expit(z)).astype(np.float32)
    p = scipy.special.expit(1.5 * z + 0.8).astype(np.float32)  # miscalibrated
    return y, p


def _sklearn(y: np.ndarray, p: np.ndarray) -> np.ndarray:
    f = scipy.special.logit(p.astype(np.float64))[:, None]
    lr = LogisticRegression(C=np.inf, solver="lbfgs", tol=1e-8, max_iter=1000).fit(f, y)
    return np.array([-lr.coef_[0, 0], -lr.intercept_[0]])  # Platt's A, B


def main(quick: bool = False) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    peer = "sklearn LogisticRegression (lbfgs)"

    # --- one fit ---
    n = 100_000 if quick else 1_000_000
    tag = "1e5" if quick else "1e6"
    y, p = _data(rng, (n,))
    yj, pj = jnp.asarray(y), jnp.asarray(p)
    hard = functools.partial(fit_platt, soft_labels=False)
    jitted = jax.jit(hard)
    ref = _sklearn(y, p)
    for cal in (hard(y, p), jitted(yj, pj)):
        np.testing.assert_allclose([float(cal.a), float(cal.b)], ref, rtol=1e-4)
    t_peer = median_time(lambda: _sklearn(y, p), repeat=3)
    t_eager = median_time(lambda: hard(y, p), repeat=5)
    t_jit = median_time(lambda: jitted(yj, pj), repeat=5)
    goal = None if quick else 5.0  # issue "One library", item 4 (N = 1e6)
    rows.append(
        row(f"fit_platt n={tag} (eager, numpy input)", t_eager, t_peer, peer, goal=goal)
    )
    rows.append(row(f"fit_platt n={tag} (jit, JAX input)", t_jit, t_peer, peer, goal=goal))

    # --- many fits ---
    sets, m = (20, 10_000) if quick else (100, 10_000)
    ys, ps = _data(rng, (sets, m))
    ysj, psj = jnp.asarray(ys), jnp.asarray(ps)
    batched = jax.jit(jax.vmap(hard))
    out = batched(ysj, psj)
    refs = np.array([_sklearn(ys[i], ps[i]) for i in range(sets)])
    np.testing.assert_allclose(np.stack([out.a, out.b], axis=1), refs, rtol=1e-4, atol=1e-6)
    t_peer = median_time(lambda: [_sklearn(ys[i], ps[i]) for i in range(sets)], repeat=3)
    t_ours = median_time(lambda: batched(ysj, psj), repeat=5)
    rows.append(
        row(
            f"vmap of {sets} fit_platt, n=1e4 each (jit)",
            t_ours,
            t_peer,
            f"loop over {peer}",
        )
    )
    return rows


if __name__ == "__main__":
    from _common import print_table

    print_table(main())
