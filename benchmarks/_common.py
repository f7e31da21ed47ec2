"""Shared helpers for the side-by-side benchmarks (medians and ratios)."""

from __future__ import annotations

import os
import pathlib
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import jax


def block(x: Any) -> Any:
    """Wait for JAX results (no-op for numpy)."""
    return jax.block_until_ready(x)


def median_time(fn: Callable[[], Any], *, repeat: int = 7, warmup: int = 1) -> float:
    """Median wall time in seconds of ``fn()`` over ``repeat`` runs after warm-up."""
    for _ in range(warmup):
        block(fn())
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        block(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def row(
    name: str,
    ours: float,
    peer: float,
    peer_name: str,
    note: str = "",
    *,
    goal: float | None = None,
) -> dict:
    """One result row: medians in ms and peer/ours speed ratio (> 1 means we are faster).

    ``goal``: the smallest speed-up this row must show (an issue's target, e.g. 5 for
    "at least 5x the peer", 1 / 1.5 for "at most 1.5x the peer's time"); the table
    then prints it and whether the run met it, so that a regression shows.
    """
    return {
        "benchmark": name,
        "bayescal_ms": ours * 1e3,
        "peer": peer_name,
        "peer_ms": peer * 1e3,
        "speedup": peer / ours,
        "note": note,
        "goal": goal,
    }


def goal_text(r: dict) -> str:
    """``">= 5.00x met"`` / ``">= 5.00x MISSED"`` for a row with a goal, else ``""``."""
    goal = r.get("goal")
    if goal is None:
        return ""
    return f">= {goal:.2f}x {'met' if r['speedup'] >= goal else 'MISSED'}"


def print_table(rows: list[dict]) -> str:
    """The rows as one markdown table; rows with a goal (:func:`row`) say whether the
    run met it, and a line after the table counts the missed goals."""
    head = (
        f"| {'benchmark':<44} | {'bayescal (ms)':>13} | {'peer':<34} | {'peer (ms)':>10} "
        f"| {'speed-up':>8} | {'goal':<16} |"
    )
    sep = "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append(
            f"| {r['benchmark']:<44} | {r['bayescal_ms']:>13.2f} | {r['peer']:<34} | "
            f"{r['peer_ms']:>10.2f} | {r['speedup']:>7.2f}x | {goal_text(r):<16} |"
        )
    goals = [r for r in rows if r.get("goal") is not None]
    if goals:
        missed = [r["benchmark"] for r in goals if r["speedup"] < r["goal"]]
        lines.append("")
        lines.append(
            f"Goals: {len(goals) - len(missed)} of {len(goals)} met"
            + (f"; missed: {'; '.join(missed)}" if missed else "")
        )
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def copy_bandwidth(num_bytes: int = 1 << 30) -> float:
    """GB/s of a read+write device copy of ``num_bytes`` (the limit of one pass)."""
    import jax.numpy as jnp

    x = jnp.ones((num_bytes // 4,), jnp.float32)
    copy = jax.jit(lambda a: a + 0)  # forces a full read and write
    t = median_time(lambda: copy(x))
    return 2 * num_bytes / t / 1e9


def bandwidth_rows(n: int) -> list[dict]:
    """Per kernel: median ms, GB/s of input read, fraction of the copy bandwidth."""
    import jax.numpy as jnp

    from bayescal.classification import expected_calibration_error
    from bayescal.regression import calibration_error, pit_draws, pit_normal

    key = jax.random.key(0)
    u = jax.random.uniform(key, (n,))
    y = (jax.random.uniform(jax.random.key(1), (n,)) < u).astype(jnp.float32)
    s, m = 1000, max(n // 1000, 1000)
    draws = jax.random.normal(key, (s, m))
    yy = jax.random.normal(jax.random.key(2), (m,))
    zeros, ones = jnp.zeros((n,)), jnp.ones((n,))
    cases = [
        ("calibration_error (100 levels)", lambda: calibration_error(u), 4 * n),
        (
            "expected_calibration_error (15 bins)",
            lambda: expected_calibration_error(y, u),
            8 * n,
        ),
        ("pit_normal", lambda: pit_normal(u, zeros, ones), 12 * n),
        (f"pit_draws [{s}, {m}]", lambda: pit_draws(yy, draws), 4 * s * m),
    ]
    copy = copy_bandwidth()
    rows = []
    for name, fn, nbytes in cases:
        t = median_time(fn)
        gbs = nbytes / t / 1e9
        rows.append({"kernel": name, "ms": t * 1e3, "GB/s": gbs, "of copy": gbs / copy})
    rows.append(
        {"kernel": "copy (read + write)", "ms": float("nan"), "GB/s": copy, "of copy": 1.0}
    )
    return rows


def print_bandwidth(rows: list[dict]) -> None:
    print(f"| {'kernel':<40} | {'ms':>9} | {'GB/s':>8} | {'of copy':>8} |")
    print("|" + "-" * 42 + "|" + "-" * 11 + "|" + "-" * 10 + "|" + "-" * 10 + "|")
    for r in rows:
        print(
            f"| {r['kernel']:<40} | {r['ms']:>9.3f} | {r['GB/s']:>8.1f} | {r['of copy']:>8.2f} |"
        )


def write_atomic(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
