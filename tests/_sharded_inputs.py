"""Public functions on inputs sharded over 8 simulated CPU devices (see test_sharded_inputs.py).

Imported by the test (for the cases and their inputs) and run as a script in a
subprocess with ``--xla_force_host_platform_device_count=8``: for every case named on
the command line (all by default) and every mode (``eager``, ``jit``), the case's
function runs on its inputs sharded along the observation axis (``name:mode``
arguments run only those), one more JAX
operation is applied to every array of the result (a result laid out as
``{maximal device=0}`` raised ``TypeError: Cannot convert GSPMDSharding ... into
SdyArray`` there), and the leaves are saved to ``OUT_DIR/<case>-<mode>.npz`` (the
message of a case that must raise to ``<case>-<mode>.txt``). The test
compares them with the unsharded result computed in its own (one-device) process.
A line ``start <case> <mode>`` precedes each run, so an abort names its case.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np


def _binary(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n).astype(np.float32)
    y = (rng.uniform(size=n) < p).astype(np.float32)
    return y, p


def _multiclass(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    u = rng.uniform(size=(n, 1))
    labels = (u < np.cumsum(probs, axis=1)).argmax(axis=1).astype(np.int32)
    return labels, probs


def _responses(n: int, seed: int = 2):
    rng = np.random.default_rng(seed)
    return (np.linspace(0.0, 1.0, n) + 0.3 * rng.normal(size=n)).astype(np.float32)


# N = 32,768 aborted every PAV-based function (issue 22, item 4; N = 24,576 did not);
# the CORP band with 50 resamples aborted already at N = 2,000.
N = 32_768


def _with_gather_limit(fn, limit):
    """``fn`` run with ``sorting.GATHER_MAX_SIZE = limit`` (its size guard, tested small)."""

    def run(*args):
        from bayescal._src import sorting

        old, sorting.GATHER_MAX_SIZE = sorting.GATHER_MAX_SIZE, limit
        try:
            return fn(*args)
        finally:
            sorting.GATHER_MAX_SIZE = old

    return run


#: Cases that must raise on the mesh: ``{name: regex of the message}``.
RAISES = {
    "fit_isotonic_beyond_gather_limit": r"needs the whole array on every device.*"
    r"jax\.device_put\(x, jax\.devices\(\)\[0\]\)",
}


def cases():
    """``{name: (function, inputs)}``; the function takes the inputs positionally.

    The cases named in :data:`RAISES` must raise with that message on the mesh.
    """
    import jax

    from bayescal import classification as C
    from bayescal import core

    key = jax.random.key(0)
    y, p = _binary(N)
    y_small, p_small = _binary(2_000)
    labels, probs = _multiclass(N)
    return {
        "brier_decomposition": (C.brier_decomposition, (y, p)),
        "corp_curve": (C.corp_curve, (y, p)),
        "corp_curve_key": (
            lambda y, p: C.corp_curve(y, p, key=key, num_samples=2),
            (y, p),
        ),
        "corp_curve_key_small": (
            lambda y, p: C.corp_curve(y, p, key=key, num_samples=50),
            (y_small, p_small),
        ),
        "fit_isotonic": (C.fit_isotonic, (y, p)),
        "fit_one_vs_rest_isotonic": (
            lambda y, q: C.fit_one_vs_rest(y, q, method="isotonic"),
            (labels, probs),
        ),
        "isotonic_regression": (core.isotonic_regression, (_responses(N),)),
        # another N than fit_isotonic's: no compiled program to reuse (it would not trace)
        "fit_isotonic_beyond_gather_limit": (
            _with_gather_limit(C.fit_isotonic, 1000),
            _binary(4096),
        ),
    }


MODES = ("eager", "jit")


def leaves(out):
    import jax

    return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]


def _main(names: list[str], out_dir: str) -> None:
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import bayescal

    if os.environ.get("BAYESCAL_CACHE_DIR"):  # the tests' shared cache (tests/conftest.py)
        bayescal.enable_compilation_cache(os.environ["BAYESCAL_CACHE_DIR"], concurrent=True)
    assert jax.device_count() == 8, jax.device_count()
    mesh = Mesh(np.array(jax.devices()), ("d",))

    def put(a):  # the observation axis (the first) over the mesh
        return jax.device_put(a, NamedSharding(mesh, P("d", *([None] * (a.ndim - 1)))))

    table = cases()
    runs = [item.split(":") for item in names] if names else [
        (name, mode) for name in table for mode in MODES
    ]
    for name, mode in runs:
        fn, inputs = table[name]
        print("start", name, mode, flush=True)
        t = time.perf_counter()
        run = jax.jit(fn) if mode == "jit" else fn
        if name in RAISES:
            try:
                run(*[put(a) for a in inputs])
            except Exception as err:  # the test matches the message
                message = f"{type(err).__name__}: {err}"
            else:
                message = "no error"
            with open(os.path.join(out_dir, f"{name}-{mode}.txt"), "w") as f:
                f.write(message)
            print(f"ok {name} {mode} {time.perf_counter() - t:.1f} s", flush=True)
            continue
        out = run(*[put(a) for a in inputs])
        # one more JAX operation on every array of the result
        out = jax.tree_util.tree_map(lambda a: jnp.asarray(a) + jnp.zeros((), a.dtype), out)
        np.savez(os.path.join(out_dir, f"{name}-{mode}.npz"), *leaves(out))
        print(f"ok {name} {mode} {time.perf_counter() - t:.1f} s", flush=True)
    print("ALL OK", flush=True)


if __name__ == "__main__":
    _main(sys.argv[2:], sys.argv[1])
