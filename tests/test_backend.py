"""The path switches (bayescal/_src/backend.py) and the kernel path's host-side padding.

``BAYESCAL_HOST_PATH`` and ``core.host_path`` choose between the NumPy twins and the
compiled kernels; ``BAYESCAL_REHEARSAL`` makes a CPU compile what an accelerator
compiles. Both are read when a call is made. Also here: the helpers that let the
kernel path pad and slice on the host without a program per length
(``validation.paddable``, ``slice_without_program``, ``host_copy``), and the
subprocess runner of the sharded tests (``tests/_progress.py``).
"""

from __future__ import annotations

import sys

import jax
import numpy as np
import pytest

from bayescal import classification as C
from bayescal import core
from bayescal._src import backend, host
from bayescal._src import validation as _v
from tests._progress import run
from tests.conftest import compilations_during


@pytest.fixture
def no_switches(monkeypatch):
    monkeypatch.delenv("BAYESCAL_HOST_PATH", raising=False)
    monkeypatch.delenv("BAYESCAL_REHEARSAL", raising=False)
    return monkeypatch


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    return (rng.uniform(size=n) < p).astype(np.int32), p


def test_the_environment_is_read_at_call_time(no_switches):
    assert backend.host_path_enabled() and host.active()
    no_switches.setenv("BAYESCAL_HOST_PATH", "0")
    assert not backend.host_path_enabled() and not host.active()
    no_switches.setenv("BAYESCAL_HOST_PATH", "yes")
    assert backend.host_path_enabled()
    no_switches.setenv("BAYESCAL_REHEARSAL", "1")
    assert not backend.host_path_enabled()
    assert not backend.cpu_backend()  # the accelerator's branches


def test_the_context_manager_wins_over_the_environment(no_switches):
    no_switches.setenv("BAYESCAL_HOST_PATH", "0")
    with core.host_path(True):
        assert host.active()
        with core.host_path(False):
            assert not host.active()
        assert host.active()
    assert not host.active()
    no_switches.delenv("BAYESCAL_HOST_PATH")
    with core.host_path(False):
        assert not host.active()
    assert host.active()


def test_the_rehearsal_wins_over_the_context_manager(no_switches):
    no_switches.setenv("BAYESCAL_REHEARSAL", "1")
    with core.host_path(True):
        assert not host.active()


def test_bad_switch_values_name_the_variable_and_the_choices(no_switches):
    no_switches.setenv("BAYESCAL_HOST_PATH", "maybe")
    with pytest.raises(ValueError, match=r"BAYESCAL_HOST_PATH='maybe'.*set it to 1"):
        backend.host_path_enabled()
    with pytest.raises(TypeError, match="host_path.enabled. takes True or False"):
        with core.host_path("no"):
            pass


def test_the_switch_changes_the_path_not_the_result(no_switches):
    y, p = _data(3001)
    # a new length: the NumPy twin compiles nothing, the kernel one program
    assert compilations_during(lambda: C.expected_calibration_error(y, p)) == 0
    with core.host_path(False):
        got = []
        count = compilations_during(lambda: got.append(C.expected_calibration_error(y, p)))
        assert count >= 1
    np.testing.assert_allclose(float(got[0]), float(C.expected_calibration_error(y, p)), rtol=2e-5)


def test_the_rehearsal_compiles_nothing_at_a_new_length_in_a_bucket(no_switches):
    # NumPy data on an accelerator: converted to a device array, padded and cut back
    # on the host, checked on its host copy
    no_switches.setenv("BAYESCAL_REHEARSAL", "1")
    cal = C.fit_platt(*_data(500, seed=1))
    first = cal(_data(1000)[1])  # bucket 1024: compiles the map once
    assert first.shape == (1000,)
    p = _data(1013, seed=2)[1]
    out = []
    assert compilations_during(lambda: out.append(jax.block_until_ready(cal(p)))) == 0
    assert out[0].shape == (1013,)
    no_switches.delenv("BAYESCAL_REHEARSAL")
    np.testing.assert_allclose(np.asarray(out[0]), np.asarray(cal(p)), rtol=2e-5)


def test_host_copies_are_those_of_converted_numpy_data(no_switches):
    no_switches.setenv("BAYESCAL_REHEARSAL", "1")  # a CPU JAX array is then a device array
    data = np.linspace(0, 1, 7)
    arr = _v.as_float_array(data, "x")
    copy = _v.host_copy(arr)
    assert copy is not None and np.array_equal(copy, data.astype(arr.dtype))
    assert _v.host_copy(arr + 1) is None  # computed on the device: no host copy
    assert _v.host_copy(data) is data
    assert _v.paddable(arr) and _v.paddable(data) and not _v.paddable(1.0)


def test_a_slice_without_program_keeps_values_and_device(no_switches):
    no_switches.setenv("BAYESCAL_REHEARSAL", "1")
    x = jax.device_put(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    out = []
    assert compilations_during(lambda: out.append(_v.slice_without_program(x, (slice(None), slice(0, 3))))) == 0
    assert isinstance(out[0], jax.Array)
    assert out[0].devices() == x.devices()
    np.testing.assert_array_equal(np.asarray(out[0]), np.asarray(x)[:, :3])
    np.testing.assert_array_equal(np.asarray(_v.host_copy(out[0])), np.asarray(x)[:, :3])


def _script(body):
    return [sys.executable, "-c", body]


def test_a_slow_subprocess_that_makes_progress_is_not_ended():
    body = "import time\nfor i in range(4):\n    time.sleep(0.6); print(i, flush=True)"
    out = run(_script(body), stall=1.5)
    assert out.returncode == 0 and out.stalled_after is None  # 2.4 s in all, > stall
    assert out.stdout.split() == ["0", "1", "2", "3"]


def test_a_silent_subprocess_is_ended_as_a_hang():
    body = "import sys, time\nprint('started', flush=True)\nprint('err', file=sys.stderr)\ntime.sleep(60)"
    out = run(_script(body), stall=1.0)
    assert out.returncode is None and out.stalled_after >= 1.0
    assert out.stdout == "started\n" and "err" in out.stderr
