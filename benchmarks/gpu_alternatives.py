"""Alternatives to the accelerator kernels, side by side: the numbers behind docs/gpu.md's
"Measured on an H200" beyond the library's own kernels (which ``bench_gpu.py`` times).

Usage::

    python benchmarks/gpu_alternatives.py pav     # PAV formulations, scipy beside
    python benchmarks/gpu_alternatives.py pit     # counts of draws at or below y
    python benchmarks/gpu_alternatives.py hist    # per-bin sums and level counts
    python benchmarks/gpu_alternatives.py hist --small   # CPU smoke test, tiny N

- ``pav``: the PAV in XLA (:mod:`bayescal._src.isotonic`) as accelerators run it
  (searches of 4 to 32 ways in loops of fixed trip counts: ``accel``) at N = 1e4-1e8,
  and at 1e6 as CPU meshes run it (binary searches: ``mesh``) and with 0 or 5 levels
  solved at once (``accel solved=0``, ``solved=5``; the library solves 4),
  first call and warm median, checked against ``scipy.optimize.isotonic_regression``
  (float64) up to 1e7; then adversarial inputs (alternating runs, one huge pool, ties,
  weights) at 1e6.
- ``pit``: a plain ``jnp.mean(draws <= y, axis=0)``, the count ``pit_draws`` used
  before (an integer count and a separate finiteness reduction: ``two-pass``), the
  current one (``_pit._count_broadcast``) and the public function under ``jit``.
- ``hist``: formulations of the 15-bin counts and sums (ECE, reliability curves) and
  of the counts at 100 levels (calibration curves) that are not the library's
  defaults, each checked equal to the library's compare kernel: sibling row
  reductions, one-hot along the minor axis, batched one-hot matmuls, block-private and
  global scatter-adds.

Each time is a median after one call (whose time, compilation included, is printed as
``first``). Meant for an accelerator; on a CPU, ``--small`` runs every case at tiny
sizes (tests/test_bench_gpu.py), numbers that measure nothing.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # this checkout's bayescal, not an installed one

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import copy_bandwidth, median_time  # noqa: E402

from bayescal._src import binning as b  # noqa: E402
from bayescal._src import isotonic as iso  # noqa: E402
from bayescal._src.binned import uniform_edges  # noqa: E402

SMALL = False
T0 = time.perf_counter()


def log(*a):
    print(f"[{time.perf_counter() - T0:6.1f}s]", *a, flush=True)


def timed(fn, args, repeat=5):
    """(first call in s, compilation included; warm median in s)."""
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t
    warm = median_time(lambda: fn(*args), repeat=repeat, warmup=0)
    return first, warm


# ------------------------------------------------------------------ PAV
def pav():
    import scipy.optimize as so

    variants = {
        "mesh": dict(wide=False),
        "accel": dict(wide=True),
        "accel solved=0": dict(wide=True, solved=0),
        "accel solved=5": dict(wide=True, solved=5),
    }

    def make(v):
        row = functools.partial(iso._device_pav_row, **v)
        return jax.jit(lambda y, w: jax.vmap(row)(y[None], w[None])[0])

    fns = {k: make(v) for k, v in variants.items()}
    sizes = [10**3] if SMALL else [10**4, 10**5, 10**6, 10**7, 10**8]
    for n in sizes:
        u = jax.random.uniform(jax.random.key(1), (n,))
        y = (u < jnp.linspace(0, 1, n)).astype(jnp.float32)  # CORP: labels, sorted p
        w = jnp.ones((n,), jnp.float32)
        ref = None
        if n <= 10**7:
            yh = np.asarray(y, np.float64)
            t = time.perf_counter()
            ref = so.isotonic_regression(yh).x
            log(
                f"PAV n={n:.0e} scipy host float64 {1e3 * (time.perf_counter() - t):.2f} ms"
            )
        names = ["accel"] + (["mesh", "accel solved=0", "accel solved=5"] if n == 10**6 else [])
        for name in names:
            first, warm = timed(fns[name], (y, w), repeat=3 if n >= 10**7 else 5)
            err = ""
            if ref is not None:  # float32 fits of values in [0, 1] against float64
                gap = np.abs(np.asarray(fns[name](y, w)) - ref).max()
                if not gap <= 1e-5:
                    raise SystemExit(f"PAV {name} at n={n}: {gap:.1e} from scipy's fit")
                err = f" maxabs {gap:.1e}"
            log(
                f"PAV n={n:.0e} {name:<12} first {first:7.2f} s  warm {1e3 * warm:9.2f} ms{err}"
            )
    # adversarial classes at 1e6, the accelerator formulation against scipy
    n = 10**3 if SMALL else 10**6
    rng = np.random.default_rng(0)
    cases = {
        "alternating runs": np.where((np.arange(n) // (n // 16)) % 2 == 0, 1.0, 0.0)
        + np.linspace(0, 0.5, n),
        "one huge pool": np.r_[n * n / 4.0, np.arange(1, n, dtype=float)],
        "ties (3 values)": rng.integers(0, 3, n).astype(float),
        "normal, weighted": rng.normal(size=n),
    }
    for name, yv in cases.items():
        wv = rng.uniform(0.1, 3, n) if "weighted" in name else np.ones(n)
        got = np.asarray(
            fns["accel"](jnp.asarray(yv, jnp.float32), jnp.asarray(wv, jnp.float32))
        )
        ref = so.isotonic_regression(
            yv.astype(np.float32).astype(float), weights=wv.astype(np.float32).astype(float)
        ).x
        rel = np.abs(got - ref).max() / np.abs(ref).max()
        if not rel <= 1e-6:
            raise SystemExit(f"PAV on {name}: {rel:.1e} from scipy's fit")
        log(f"PAV adversarial {name:<18} rel err {rel:.1e}")


# ------------------------------------------------------------------ histograms
K = 15
LEVELS = 100


def _parts(p, y):
    one = jnp.asarray(1.0, p.dtype)
    return [*b._split(p, one), *b._split(y, one)]


def h_minor(p, y, edges):
    ib = b._blocks(b.bin_index(p, edges), -1)
    hit = ib[:, None, :] == jnp.arange(K, dtype=ib.dtype)[None, :, None]
    count = jnp.sum(jnp.sum(hit, axis=-1, dtype=jnp.int32), axis=0)
    block = tuple(
        jnp.sum(jnp.where(hit, b._blocks(v, 0)[:, None, :], 0), axis=-1)
        for v in _parts(p, y)
    )
    return count, tuple(s + c for s, c in b._merge_blocks(block, 2))


def h_siblings(p, y, edges):
    ib = b._blocks(b.bin_index(p, edges), -1)
    vs = [b._blocks(v, 0) for v in _parts(p, y)]
    counts, block = [], [[] for _ in vs]
    for k in range(K):
        m = ib == k
        counts.append(jnp.sum(m, axis=-1, dtype=jnp.int32))
        for i, v in enumerate(vs):
            block[i].append(jnp.sum(jnp.where(m, v, 0), axis=-1))
    count = jnp.sum(jnp.stack(counts, -1), axis=0)
    block = tuple(jnp.stack(x, -1) for x in block)
    return count, tuple(s + c for s, c in b._merge_blocks(block, 2))


def h_mma(p, y, edges):
    ib = b._blocks(b.bin_index(p, edges), -1)
    onehot = (ib[:, :, None] == jnp.arange(K, dtype=ib.dtype)).astype(p.dtype)
    vals = jnp.stack(
        [jnp.ones_like(ib, p.dtype)] + [b._blocks(v, 0) for v in _parts(p, y)], -1
    )
    res = jnp.einsum("nbk,nbv->nkv", onehot, vals, precision=jax.lax.Precision.HIGHEST)
    count = jnp.sum(res[..., 0].astype(jnp.int32), axis=0)
    block = tuple(res[..., i] for i in range(1, 5))
    return count, tuple(s + c for s, c in b._merge_blocks(block, 2))


def h_scatter(p, y, edges):
    return b.bin_sums(b.bin_index(p, edges), K, (p, y), bounded=True, variant="scatter")


def l_block_scatter(u):
    idx = b.grid_index(u, LEVELS)
    n = u.shape[0]
    nb = -(-n // 256)
    seg = jnp.arange(n, dtype=jnp.int32) // 256 * LEVELS + jnp.minimum(idx, LEVELS)
    seg = jnp.where(idx < LEVELS, seg, nb * LEVELS)
    per = jax.ops.segment_sum(jnp.ones((n,), jnp.int32), seg, num_segments=nb * LEVELS)
    return jnp.cumsum(jnp.sum(per.reshape(nb, LEVELS), axis=0))


def l_scatter(u):
    return b.count_at_or_below(u, LEVELS, variant="scatter")


def l_minor(u):
    levels = jnp.linspace(0.0, 1.0, LEVELS, dtype=u.dtype)
    blocks = b._blocks(u, jnp.nan)
    per = jnp.sum(blocks[:, None, :] <= levels[None, :, None], axis=-1, dtype=jnp.int32)
    return jnp.sum(per, axis=0)


def l_grid_minor(u):
    ib = b._blocks(b.grid_index(u, LEVELS), -1)
    per = jnp.sum(
        ib[:, None, :] == jnp.arange(LEVELS)[None, :, None], axis=-1, dtype=jnp.int32
    )
    return jnp.cumsum(jnp.sum(per, axis=0))


def l_mma(u):
    ib = b._blocks(b.grid_index(u, LEVELS), -1)
    onehot = (ib[:, :, None] == jnp.arange(LEVELS)).astype(jnp.bfloat16)
    ones = jnp.ones(ib.shape, jnp.bfloat16)
    per = jnp.einsum("nbk,nb->nk", onehot, ones, preferred_element_type=jnp.float32)
    return jnp.cumsum(jnp.sum(per.astype(jnp.int32), axis=0))


def hist():
    copy = copy_bandwidth(1 << 26 if SMALL else 1 << 30)
    log(f"copy {copy:.1f} GB/s")
    sizes = [1000] if SMALL else [10**6, 10**7, 10**8]
    for n in sizes:
        p = jax.random.uniform(jax.random.key(0), (n,))
        y = (jax.random.uniform(jax.random.key(1), (n,)) < p).astype(p.dtype)
        u = jax.random.uniform(jax.random.key(2), (n,))
        edges = uniform_edges(K, p.dtype)
        ref = jax.jit(
            lambda p, y, e: b.bin_sums(
                b.bin_index(p, e), K, (p, y), bounded=True, variant="compare"
            )
        )(p, y, edges)
        lref = np.asarray(
            jax.jit(lambda u: b.count_at_or_below(u, LEVELS, variant="compare"))(u)
        )
        sums = [("scatter", h_scatter), ("siblings", h_siblings), ("minor", h_minor)]
        for name, f in sums + [("mma", h_mma)]:
            fn = jax.jit(functools.partial(f, edges=edges))
            first, warm = timed(fn, (p, y))
            c, s = fn(p, y)
            ok = np.array_equal(np.asarray(c), np.asarray(ref[0])) and all(
                np.allclose(np.asarray(a), np.asarray(r), rtol=1e-6)
                for a, r in zip(s, ref[1], strict=True)
            )
            if not ok:
                raise SystemExit(f"bins15 {name} at n={n}: differs from the compare kernel")
            gbs = 8 * n / warm / 1e9
            log(
                f"bins15 n={n:.0e} {name:<10} first {first:6.2f} s warm {1e3 * warm:8.3f} ms {gbs:7.1f} GB/s {gbs / copy:.2f} of copy equal={ok}"
            )
        levels = [("scatter", l_scatter), ("block-scatter", l_block_scatter)]
        levels += [("minor", l_minor), ("grid-minor", l_grid_minor), ("mma", l_mma)]
        for name, f in levels:
            fn = jax.jit(f)
            first, warm = timed(fn, (u,))
            ok = np.array_equal(np.asarray(fn(u)), lref)
            if not ok:
                raise SystemExit(
                    f"levels100 {name} at n={n}: differs from the compare kernel"
                )
            gbs = 4 * n / warm / 1e9
            log(
                f"levels100 n={n:.0e} {name:<10} first {first:6.2f} s warm {1e3 * warm:8.3f} ms {gbs:7.1f} GB/s {gbs / copy:.2f} of copy equal={ok}"
            )


# ------------------------------------------------------------------ pit_draws
def pit():
    from bayescal.regression import _pit, pit_draws

    def old(y, d, strict):
        le = jnp.sum(d <= y, axis=0, dtype=jnp.int32)
        lt = jnp.sum(d < y, axis=0, dtype=jnp.int32) if strict else jnp.zeros_like(le)
        return le, lt, jnp.all(jnp.isfinite(d))

    shapes = [(100, 1000)] if SMALL else [(1000, 10**6), (4000, 10**6)]
    key = jax.random.key(3)
    for s, n in shapes:
        d = jax.random.normal(jax.random.key(0), (s, n))
        y = jax.random.normal(jax.random.key(1), (n,))
        cases = [
            ("plain mean(d <= y)", jax.jit(lambda y, d: jnp.mean(d <= y, axis=0)), (y, d)),
            ("two-pass count", jax.jit(functools.partial(old, strict=False)), (y, d)),
            (
                "count",
                jax.jit(functools.partial(_pit._count_broadcast, strict=False)),
                (y, d),
            ),
            ("two-pass count, both", jax.jit(functools.partial(old, strict=True)), (y, d)),
            (
                "count, both",
                jax.jit(functools.partial(_pit._count_broadcast, strict=True)),
                (y, d),
            ),
            ("pit_draws jit", jax.jit(pit_draws), (y, d)),
            ("pit_draws jit, key", jax.jit(lambda y, d: pit_draws(y, d, key=key)), (y, d)),
        ]
        for name, fn, args in cases:
            first, warm = timed(fn, args, repeat=7)
            log(
                f"pit [{s}, {n:.0e}] {name:<22} warm {1e3 * warm:8.3f} ms  {4 * s * n / warm / 1e9:7.1f} GB/s"
            )


def main(argv=None) -> int:
    global SMALL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("pav", "pit", "hist", "all"))
    parser.add_argument("--small", action="store_true", help="tiny sizes (CPU smoke test)")
    args = parser.parse_args(argv)
    SMALL = args.small
    print(f"# gpu_alternatives: jax {jax.__version__}, {jax.devices()}", flush=True)
    for name in ("pav", "pit", "hist") if args.what == "all" else (args.what,):
        {"pav": pav, "pit": pit, "hist": hist}[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
