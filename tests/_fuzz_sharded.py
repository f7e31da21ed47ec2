"""The fuzz harness on inputs sharded over 8 simulated CPU devices (issue 22, done-when).

Run as a script by ``tests/test_fuzz_sharded.py``, in a
subprocess, because ``--xla_force_host_platform_device_count=8`` must be set before JAX
initialises: ``python _fuzz_sharded.py [ENTRY ...]``. For every entry of
``test_fuzz.TABLE`` it draws inputs with the harness's builders at sizes that split
over the mesh, mutates one argument with a value mutation (NaN or inf in the first or
the last shard, huge, tiny and subnormal values, other dtypes, a length that does not
split and is replicated instead), puts every array argument on the mesh (the
observation axis sharded, or replicated where it does not split) and checks, eagerly
and under ``jax.jit``:

- the harness's own property (``test_fuzz.check``): a ValueError/TypeError naming an
  argument, or a finite result equal to the float64 reference;
- the same outcome as the same call on the gathered (unsharded) inputs in this
  process: the same exception class, or results equal (integers exactly, floats to
  ``RTOL`` relative: a sum over 8 shards rounds differently from one over the whole).

It prints ``start ENTRY`` before and one JSON line ``{"entry", "ok", "message"}``
after each entry, so an abort or a hang names its entry.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # before JAX initialises
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    )

import functools  # noqa: E402
import json  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEVICES = 8
SIZES = (8, 16)  # split over the mesh; two sizes, few compilations
RTOL = 1e-5  # a float32 sum over 8 shards vs one: a few ulps; Newton fits to 1e-5
#: Drawn cases per entry. The default run (``make test``) takes one case an entry, its
#: argument and mutation enumerated by the entry's place in the table (the 44
#: entries cover each of the 23 mutations once or twice; ~4 minutes of CPU where three
#: drawn cases took ~10); the other profiles draw them.
EXAMPLES = {"default": 1, "medium": 40, "fuzz": 400}
#: Mutations of ``test_fuzz.MUTATIONS`` that keep a numeric array (a container, a
#: mask or an object array never reaches the mesh: the user could not shard it).
SHARDABLE = (
    "none", "nan", "inf", "-inf", "huge value", "float32 max", "tiny value", "negative",
    "above one", "all scaled by 1e30", "all scaled by 1e-30", "mismatched", "one extra",
    "bool", "int32", "uint8", "float16", "float32", "float64", "subnormal value",
)


def _set_last(a, value):
    a = np.array(a, dtype=np.float64)
    if a.size:
        a.reshape(-1)[-1] = value
    return a


#: Values in the last shard: the first element lives on device 0 only.
EXTRA = {
    "nan in the last shard": lambda a: _set_last(a, np.nan),
    "inf in the last shard": lambda a: _set_last(a, np.inf),
    "subnormal in the last shard": lambda a: _set_last(a, 1e-310 if _x64() else 1e-40),
}


def _x64() -> bool:
    import jax

    return bool(jax.config.read("jax_enable_x64"))


def _put(mesh, a, n: int):
    """``a`` on the mesh: its first axis of length ``n`` sharded, else replicated."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    a = np.asarray(a)
    if a.dtype.kind not in "biuf" or a.ndim == 0:
        return a
    spec = [None] * a.ndim
    for axis, size in enumerate(a.shape):
        if size == n and size % DEVICES == 0:
            spec[axis] = "d"
            break
    return jax.device_put(a, NamedSharding(mesh, P(*spec)))


def _outcome(fn, args, keywords, jit: bool):
    import jax

    try:
        with np.errstate(all="ignore"):
            if jit:
                out = jax.jit(functools.partial(fn, **keywords))(*args)
            else:
                out = fn(*args, **keywords)
            leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]
        return "ok", leaves
    except Exception as err:  # noqa: BLE001 - compared between the two calls
        return type(err).__name__, str(err)


def _same(context: str, sharded, gathered) -> None:
    kind_s, value_s = sharded
    kind_g, value_g = gathered
    assert kind_s == kind_g, (
        f"{context}: sharded gave {kind_s} ({str(value_s)[:200]}), "
        f"unsharded {kind_g} ({str(value_g)[:200]})"
    )
    if kind_s != "ok":
        return
    assert len(value_s) == len(value_g), context
    for got, want in zip(value_s, value_g, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype, (
            f"{context}: {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
        )
        if got.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want, err_msg=context)
        else:
            got64, want64 = got.astype(np.float64), want.astype(np.float64)
            scale = np.nanmax(np.abs(want64), initial=0.0) if np.isfinite(want64).any() else 0
            np.testing.assert_allclose(
                got64, want64, rtol=RTOL, atol=RTOL * scale, err_msg=context
            )


def run_entry(entry, mesh, examples: int, index: int | None = None) -> None:
    """The two properties for ``examples`` drawn cases of one table entry; with an
    ``index`` (the entry's place in the table), one case whose mutated argument and
    mutation are enumerated by it instead of drawn."""
    import jax
    import test_fuzz as F
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    mutations = {**{k: F.MUTATIONS[k] for k in SHARDABLE}, **EXTRA}

    @settings(max_examples=examples, deadline=None, derandomize=F.PROFILE != "fuzz",
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def run(data):
        n = data.draw(st.sampled_from(SIZES))
        args = entry.build(data.draw, n)
        if index is None:
            target = data.draw(st.sampled_from(list(args)))
            how = data.draw(st.sampled_from(list(mutations)))
        else:
            target = list(args)[index % len(args)]
            how = list(mutations)[index % len(mutations)]
        with np.errstate(all="ignore"):
            args[target] = mutations[how](args[target])
        sharded = {k: _put(mesh, v, n) for k, v in args.items()}
        gathered = {k: np.asarray(v) for k, v in sharded.items()}  # as the library sees it
        if how == "none":  # the harness really shards: some argument is split over the mesh
            assert any(
                isinstance(v, jax.Array) and not v.sharding.is_fully_replicated
                for v in sharded.values()
            ), (entry.name, n, {k: np.shape(v) for k, v in args.items()})
        F.check(entry, sharded, target, how)
        for jit in (False, True):
            context = f"{entry.name} with {target} {how}, n={n}, {'jit' if jit else 'eager'}"
            _same(
                context,
                _outcome(entry.fn, list(sharded.values()), entry.keywords, jit),
                _outcome(entry.fn, list(gathered.values()), entry.keywords, jit),
            )

    run()


def main(names: list[str]) -> None:
    import jax
    import test_fuzz as F
    from jax.sharding import Mesh

    assert len(jax.devices()) == DEVICES, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("d",))
    examples = EXAMPLES.get(F.PROFILE, EXAMPLES["default"])
    for index, entry in enumerate(F.TABLE):
        if names and entry.name not in names:
            continue
        print("start", entry.name, flush=True)
        try:
            run_entry(entry, mesh, examples, index if F.PROFILE == "default" else None)
            line = {"entry": entry.name, "ok": True, "message": ""}
        except BaseException as err:  # noqa: BLE001 - reported to the parent test
            if isinstance(err, KeyboardInterrupt):
                raise
            line = {"entry": entry.name, "ok": False,
                    "message": "".join(traceback.format_exception(err))[-3000:]}
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
