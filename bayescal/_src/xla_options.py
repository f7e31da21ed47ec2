"""XLA options for bayescal's own top-level programs: first calls compile fast on CPU.

A user waits for a program's compilation on every first call (a new function, option
or bucket of N), and on the CPU that wait is mostly LLVM's. For the programs of the
public calls (validation, kernel and post-processing compiled together) the options
below roughly halve it (measured on the 2-core CPU machines, 2026-11-23):

- XLA's older loop emitters instead of its MLIR fusion emitters compile these small
  loop bodies ~2x faster, run them as fast and give the same numbers (Platt's fit at
  N = 1e4: 0.44 vs 0.63 s of CPU);
- up to :data:`QUICK_COMPILE_MAX_SIZE` values in the largest argument, no LLVM
  optimisations at all (Platt: 0.17 instead of 0.44 s of CPU, for a run of 4.8 instead
  of 0.8 ms); beyond it, the run time matters more than the compile time.

With several devices (a mesh) the second one is left out: the kernels then run in XLA
instead of host callbacks (e.g. the PAV of :mod:`bayescal._src.isotonic`), and
unoptimised they ran ~10x slower (a Brier decomposition of N = 32,768 sharded over 8
CPU devices: 1.7 instead of 0.15 s a call).

They apply where JAX's default backend is the CPU and only to top-level programs (JAX
takes compiler options only there): under a user's ``jit`` or ``vmap`` the user's
program is compiled as the user compiles it. An XLA that does not know an option
(older or newer jaxlib) is noticed on the first call, which then compiles without.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from bayescal._src.backend import cpu_backend

__all__ = [
    "COMPILER_OPTIONS",
    "QUICK_COMPILE_MAX_SIZE",
    "FIT_QUICK_COMPILE_MAX_SIZE",
    "compiler_options",
    "fit_compiler_options",
    "largest",
    "pair_sum_options",
    "with_options",
]

#: Options of every top-level program on CPU.
COMPILER_OPTIONS: dict[str, Any] = {"xla_cpu_use_fusion_emitters": False}
#: Up to this many values in the largest argument, also no LLVM optimisations.
QUICK_COMPILE_MAX_SIZE = 1 << 15
_OPTIONS_KNOWN = [True]  # False once this XLA rejected the options


def compiler_options(
    size: int, quick_max_size: int | None = None, *, large: bool = True
) -> dict[str, Any]:
    """The XLA options for a program whose largest argument holds ``size`` values.

    Empty on other backends than the CPU: they were measured on CPU only. For programs
    measured with another trade-off: ``quick_max_size`` replaces
    :data:`QUICK_COMPILE_MAX_SIZE`, and ``large=False`` gives no options beyond it
    (XLA's defaults: the scatter loops of the smooth ECE and of isotonic one-vs-rest
    ran 1.6-3x slower at N = 1e6 with the older emitters).
    """
    if not cpu_backend():
        return {}
    from bayescal._src.sorting import several_devices

    limit = QUICK_COMPILE_MAX_SIZE if quick_max_size is None else quick_max_size
    if size <= limit and not several_devices():
        return dict(COMPILER_OPTIONS, xla_backend_optimization_level=0)
    return dict(COMPILER_OPTIONS) if large else {}


#: The parametric fits' programs (``newton.bucketed_fit``: Platt, beta, temperature,
#: scaling-binning, BBQ, the scaling family) compile quickly up to this many values: a
#: fit is usually called once, so its compilation is most of what a user waits for.
#: Measured at N = 1e5 (2-core CPU machine, fresh processes, 2026-11-29): Platt's first
#: call 0.52-0.58 -> 0.40 s (compilation 0.33 -> 0.17 s) for a warm fit of 27 instead of
#: 5 ms; BBQ 1.08-1.12 -> 0.72 s (warm 74 -> 190 ms). The isotonic fits (isotonic with
#: a prior, centered isotonic, Venn-ABERS) the same way, with XLA's defaults beyond.
FIT_QUICK_COMPILE_MAX_SIZE = 1 << 17


def fit_compiler_options(size: int, *, large: bool = True) -> dict[str, Any]:
    """:func:`compiler_options` with :data:`FIT_QUICK_COMPILE_MAX_SIZE` as the quick size
    (``large=False``: XLA's defaults beyond it, for the scatter-heavy isotonic fits)."""
    return compiler_options(size, FIT_QUICK_COMPILE_MAX_SIZE, large=large)


def pair_sum_options(size: int) -> dict[str, Any]:
    """The options of the O(N^2) pair-sum programs (the kernel calibration errors and
    tests) beyond tiny inputs: :func:`compiler_options` without quick compiles, at
    LLVM's optimisation level 1. Their loops of exponentials ran as fast as at the
    default level 3 (0.063 s for the regression SKCE's pairs at N = 10,240) and
    compiled faster (0.11 instead of 0.13-0.16 s; 2-core CPU machine, fresh processes);
    unoptimised code (level 0) compiled in 0.05 s but ran 4x slower (0.27 s)."""
    options = compiler_options(size, 0)
    return dict(options, xla_backend_optimization_level=1) if options else options


def largest(tree: Any) -> int:
    """The number of values in the largest array leaf of ``tree`` (0 without arrays)."""
    return max([int(np.size(a)) for a in jax.tree_util.tree_leaves(tree)] + [0])


def with_options(
    size: int,
    run: Callable[[dict[str, Any]], Any],
    policy: Callable[[int], dict[str, Any]] | None = None,
) -> Any:
    """``run(compiler_options(size))``, or ``run({})`` where XLA does not know them.

    ``policy``: another function of the size giving the options (e.g.
    :func:`compiler_options` with other arguments).
    """
    if _OPTIONS_KNOWN[0]:
        try:
            return run((compiler_options if policy is None else policy)(size))
        except jax.errors.JaxRuntimeError as err:
            if "compile option" not in str(err):
                raise
            _OPTIONS_KNOWN[0] = False
    return run({})
