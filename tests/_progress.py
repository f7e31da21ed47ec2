"""Subprocesses that are ended for a hang, never for a slow machine.

A test that runs a script in a subprocess (the 8-device sharded suites, the sharded
fuzz harness) must not hang the suite, but a fixed wall-clock limit also fails a run
that is merely slow: on a 2-core machine kept at load 4-8 by other jobs, cases of ~5 s
took 35 s and tripped a 150 s limit. :func:`run` instead ends the subprocess when it
has printed no line for ``stall`` seconds: the scripts print a line for every case
they finish, so only a case that makes no progress for that long (a hang, a deadlock
in a collective) ends it.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from typing import NamedTuple


class Outcome(NamedTuple):
    returncode: int | None  # None: ended for want of progress
    stdout: str
    stderr: str
    stalled_after: float | None  # seconds of silence that ended it, or None


def run(command, *, stall: float, env=None, cwd=None) -> Outcome:
    """Run ``command``; end it if its stdout stays silent for ``stall`` seconds."""
    lines: list[str] = []
    last = [time.monotonic()]
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=cwd
        )

        def read():
            for line in proc.stdout:
                lines.append(line)
                last[0] = time.monotonic()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stalled = None
        while proc.poll() is None:
            silent = time.monotonic() - last[0]
            if silent > stall:
                stalled = silent
                proc.kill()
                break
            time.sleep(0.2)
        proc.wait()
        reader.join(timeout=10)
        err.seek(0)
        stderr = err.read()
    return Outcome(None if stalled else proc.returncode, "".join(lines), stderr, stalled)
