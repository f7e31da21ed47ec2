"""Public functions on inputs sharded over an 8-device CPU mesh equal the unsharded ones.

Issue 22, item 4: sharded inputs to the PAV-based functions aborted the process (an
all-reduce rendezvous timeout after 40 s, SIGABRT) at N = 32,768 on 8 devices, eagerly
and under ``jit``: the host callbacks (PAV, tie pooling, sorting) ran on device 0 while
the other devices waited. With several devices they now run in XLA, on the whole
array gathered explicitly to every device (``sorting.gather_whole``).

``--xla_force_host_platform_device_count=8`` must be set before JAX initialises, so
the sharded calls run in a subprocess (``tests/_sharded_inputs.py``, every case
eagerly and under ``jit``) with a timeout: an abort or a hang fails its case instead
of blocking the suite, and the cases after it run in a fresh subprocess. Each case's result is compared here with the
same function on the unsharded inputs in this (one-device) process, whose PAV is the
host one: exact integers, floats to 1e-6 relative.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sharded_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CASES = list(_sharded_inputs.cases())
TIMEOUT = 150  # seconds for one subprocess (all cases take ~40 s cold); an abort: 40 s
BUDGET = 300  # seconds for all subprocesses (a failure costs ~45 s: later ones get fresh)


def _run(out_dir, runs, timeout):
    """Run ``runs`` (``name:mode``) in one 8-device subprocess: (finished, log)."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["JAX_PLATFORMS"] = "cpu"
    script = str(ROOT / "tests" / "_sharded_inputs.py")
    try:
        proc = subprocess.run(
            [sys.executable, script, str(out_dir), *runs],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        out, log = proc.stdout, f"exit status {proc.returncode}\n{proc.stderr[-3000:]}"
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else err.stdout or ""
        log = f"timed out after {timeout} s\n{str(err.stderr)[-3000:]}"
    finished = {":".join(line.split()[1:3]) for line in out.splitlines() if line.startswith("ok ")}
    return finished, out + log


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    """Every case and mode run once on the 8-device mesh: (output folder, logs).

    A run that aborts (or hangs) ends its subprocess; the runs after it get a fresh one,
    so every case is tried on its own account, within :data:`BUDGET` seconds in all.
    """
    out_dir = tmp_path_factory.mktemp("sharded")
    pending = [f"{name}:{mode}" for name in CASES for mode in _sharded_inputs.MODES]
    logs = {}
    deadline = time.monotonic() + BUDGET
    while pending and time.monotonic() < deadline:
        timeout = max(1, min(TIMEOUT, deadline - time.monotonic()))
        finished, log = _run(out_dir, pending, timeout)
        failed = next((r for r in pending if r not in finished), None)
        if failed is not None:
            logs[failed] = log
        pending = pending[pending.index(failed) + 1 :] if failed else []
    for run in pending:
        logs[run] = f"not run: the {BUDGET} s for all cases were spent by earlier failures"
    return out_dir, logs


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", CASES)
def test_sharded_input_equals_unsharded(sharded_run, name, mode):
    out_dir, logs = sharded_run
    log = logs.get(f"{name}:{mode}", "")
    if name in _sharded_inputs.RAISES:
        path = out_dir / f"{name}-{mode}.txt"
        assert path.exists(), f"{name} ({mode}) did not finish on the 8-device mesh:\n{log[-4000:]}"
        message = path.read_text()
        assert message.startswith("ValueError"), message
        assert re.search(_sharded_inputs.RAISES[name], message, re.S), message
        return
    path = out_dir / f"{name}-{mode}.npz"
    assert path.exists(), f"{name} ({mode}) did not finish on the 8-device mesh:\n{log[-4000:]}"
    fn, inputs = _sharded_inputs.cases()[name]
    ref = _sharded_inputs.leaves(fn(*inputs))
    with np.load(path) as got:
        got = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(got) == len(ref)
    for a, b in zip(ref, got, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if np.issubdtype(a.dtype, np.integer):
            np.testing.assert_array_equal(b, a, err_msg=name)
        else:
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7, err_msg=name)
