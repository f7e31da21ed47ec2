"""Fold ids for cross-fitting and cross-validation, shared by both branches.

``stratified_folds`` deals each class, shuffled as ``jax.random.permutation`` shuffles
it, round-robin into the folds (``cross_calibrate``, ``select_calibrator``;
``select_recalibrator`` with one class).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src.bucketing import bucket_size, random_prefix_stable

__all__ = ["stratified_folds"]


def _shuffle_rounds(m: int) -> int:
    """The sorts of ``jax.random.permutation`` for ``m`` values (jax/_src/random)."""
    return int(np.ceil(3 * np.log(max(1, m)) / np.log(np.iinfo(np.uint32).max)))


# newton.fast_jit: unoptimised code for a program this small (threefry compiles 10x
# faster so; the draws take a few ms)
@functools.partial(newton.fast_jit, static_argnums=(1, 2))
def _fold_sort_keys(key: jax.Array, size: int, rounds: int) -> jax.Array:
    """``[2, rounds, size]``: for the classes 0 and 1 (keys ``split(key)``), the sort
    keys of ``jax.random.permutation``'s rounds, drawn for ``size`` slots.

    The chains of splits run in one loop over both classes, so the program holds one
    split and one draw of random bits (each a threefry hash, slow to compile).
    """
    impl = jax.random.key_impl(key)

    def step(state, i):
        keys = jax.random.wrap_key_data(state, impl=impl)
        out = jax.random.key_data(jax.vmap(jax.random.split)(keys))  # [2, 2, ...]
        # step 0 splits the key itself (state = [key, key]) into the classes' keys,
        # the next ones each class's key into (its next key, the round's subkey)
        return jnp.where(i == 0, out[0], out[:, 0]), out[:, 1]

    data = jax.random.key_data(key)
    _, subs = jax.lax.scan(step, jnp.stack([data, data]), jnp.arange(rounds + 1))
    subs = jax.random.wrap_key_data(subs[1:], impl=impl)  # [rounds, 2]
    draw = jax.vmap(jax.vmap(lambda k: jax.random.bits(k, (size,), jnp.uint32)))
    return jnp.swapaxes(draw(subs), 0, 1)


def stratified_folds(y: np.ndarray, num_folds: int, key: jax.Array) -> np.ndarray:
    """Fold id of every observation: each class shuffled and dealt round-robin.

    The shuffles are ``jax.random.permutation(k, np.flatnonzero(y == label))`` with
    ``k`` from ``jax.random.split(key)``. Where draws are prefix-stable, its sort keys
    are drawn for the bucket of ``N`` (the first ``m`` are those of ``m`` slots) by one
    program per bucket, and its stable sorts run in NumPy: the same folds, which
    depend on ``N`` and the key only.
    """
    fold = np.empty(y.shape[0], np.int64)
    members = [np.flatnonzero(y == label) for label in (0, 1)]
    if random_prefix_stable(key):
        size = bucket_size(y.shape[0])
        keys = np.asarray(_fold_sort_keys(key, size, _shuffle_rounds(size)))
        shuffled = []
        for idx, bits in zip(members, keys, strict=True):
            for r in range(_shuffle_rounds(idx.size)):
                idx = idx[np.argsort(bits[r, : idx.size], kind="stable")]
            shuffled.append(idx)
    else:
        shuffled = [
            np.asarray(jax.random.permutation(k, idx))
            for idx, k in zip(members, jax.random.split(key), strict=True)
        ]
    start = 0
    for idx in shuffled:
        fold[idx] = (start + np.arange(idx.size)) % num_folds
        start += idx.size
    return fold


def check_fold_ids(folds: Any, n: int) -> np.ndarray:
    """User fold ids: one integer per observation (shape ``[n]``), using every id
    ``0 .. K-1`` with ``K >= 2``; returned as int64."""
    fold = np.asarray(folds)
    if fold.shape != (n,) or not np.issubdtype(fold.dtype, np.integer):
        raise ValueError(
            f"folds must be integer fold ids, one per observation (shape ({n},)); got "
            f"dtype {fold.dtype} and shape {fold.shape}."
        )
    num = int(fold.max()) + 1 if fold.size else 0
    present = np.unique(fold)
    if fold.min() < 0 or num < 2 or present.size != num:
        raise ValueError(
            f"folds must use every id 0 .. K-1 with K >= 2; got ids {present.tolist()}."
        )
    return fold.astype(np.int64)
