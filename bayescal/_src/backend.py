"""Which path a call takes: the NumPy host path, the CPU kernels, or the accelerator's.

Two switches, both read when a call is made (not only at import):

* ``BAYESCAL_HOST_PATH=0`` in the environment, or the public context manager
  :func:`bayescal.core.host_path` (``with host_path(False): ...``), turns the NumPy
  host path off: small concrete inputs on a CPU then run the same compiled kernels
  that accelerators and large inputs run. The context manager wins over the
  environment inside its block.
* ``BAYESCAL_REHEARSAL=1`` is the *accelerator rehearsal* for CPU-only machines
  (tests, CI): the host path off, and every Python-level choice that depends on the
  backend (CPU-only compiler options, NumPy shortcuts for host-resident arrays,
  tracing one platform's branch alone) takes the branch an accelerator takes, so the
  programs compiled on the CPU are those an accelerator compiles, up to XLA's own
  ``platform_dependent`` choice (tests lower those for CUDA, tests/test_device_quantiles.py).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

import jax

__all__ = ["cpu_backend", "host_path", "host_path_enabled", "rehearsal"]

_FALSE = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"1", "true", "yes", "on"})

# None: the environment decides; True/False: a host_path(...) block.
_HOST_PATH: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "bayescal_host_path", default=None
)


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise ValueError(
        f"the environment variable {name}={raw!r} is neither on nor off: set it to 1 "
        "(or true/yes/on) or 0 (or false/no/off), or unset it."
    )


def rehearsal() -> bool:
    """Whether the accelerator rehearsal is on (``BAYESCAL_REHEARSAL=1``)."""
    return _flag("BAYESCAL_REHEARSAL", False)


def host_path_enabled() -> bool:
    """Whether the NumPy host path may answer a call (on a CPU backend).

    Off inside ``host_path(False)``, else with ``BAYESCAL_HOST_PATH=0`` or in the
    rehearsal.
    """
    chosen = _HOST_PATH.get()
    if chosen is not None:
        return chosen and not rehearsal()
    return _flag("BAYESCAL_HOST_PATH", True) and not rehearsal()


def cpu_backend() -> bool:
    """Whether Python-level choices may take their CPU branch: JAX's default backend
    is the CPU and the rehearsal is off."""
    return jax.default_backend() == "cpu" and not rehearsal()


@contextlib.contextmanager
def host_path(enabled: bool = True) -> Iterator[None]:
    """Within this block, small concrete inputs on a CPU take the NumPy host path
    (``enabled=True``, the default behaviour) or the compiled kernels
    (``enabled=False``), whatever ``BAYESCAL_HOST_PATH`` says.

    The kernels are what accelerators and inputs past the host path's size run; turn
    the host path off to time or test them on a CPU. Results agree to float rounding
    (counts and bins exactly). Thread- and asyncio-safe (a context variable).

    Parameters
    ----------
    enabled : bool, default True
        True: the NumPy host path answers small concrete inputs on a CPU; False: every
        call runs the compiled kernels. The accelerator rehearsal
        (``BAYESCAL_REHEARSAL=1``) keeps it off either way.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal import core
    >>> y = np.array([0.1, 0.8, 0.6, 0.3])
    >>> with core.host_path(False):  # the compiled kernel, as on a GPU
    ...     kernel = core.isotonic_regression(y)
    >>> kernel.tolist() == core.isotonic_regression(y).tolist()
    True
    """
    if not isinstance(enabled, bool):
        raise TypeError(
            f"host_path(enabled) takes True or False, got {type(enabled).__name__}."
        )
    token = _HOST_PATH.set(enabled)
    try:
        yield
    finally:
        _HOST_PATH.reset(token)
