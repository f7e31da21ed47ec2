"""Shared helpers for the side-by-side benchmarks (medians and ratios)."""

from __future__ import annotations

import statistics
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


def row(name: str, ours: float, peer: float, peer_name: str, note: str = "") -> dict:
    """One result row: medians in ms and peer/ours speed ratio (> 1 means we are faster)."""
    return {
        "benchmark": name,
        "bayescal_ms": ours * 1e3,
        "peer": peer_name,
        "peer_ms": peer * 1e3,
        "speedup": peer / ours,
        "note": note,
    }


def print_table(rows: list[dict]) -> str:
    head = f"| {'benchmark':<44} | {'bayescal (ms)':>13} | {'peer':<34} | {'peer (ms)':>10} | {'speed-up':>8} |"
    sep = "|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|"
    lines = [head, sep]
    for r in rows:
        lines.append(
            f"| {r['benchmark']:<44} | {r['bayescal_ms']:>13.2f} | {r['peer']:<34} | "
            f"{r['peer_ms']:>10.2f} | {r['speedup']:>7.2f}x |"
        )
    text = "\n".join(lines)
    print(text, flush=True)
    return text
