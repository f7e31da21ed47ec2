"""Two CPU processes joined by ``jax.distributed`` (gloo collectives) get the global curve.

Each process holds half of the PIT values (``jax.make_array_from_process_local_data``);
the curve of the global array, and the sum of the two processes' accumulator counts,
equal the one-process curve (numpy reference: ``u <= level`` counts). Subprocesses on
127.0.0.1 with a free port and a timeout, so nothing can hang the suite.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_same_curve_as_one():
    port = _free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("XLA_FLAGS", None)
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "_multihost_worker.py"), str(port), str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=180))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for i, (p, (out, err)) in enumerate(zip(procs, outs, strict=True)):
        assert p.returncode == 0, err[-3000:]
        assert f"PROCESS {i} OK" in out
