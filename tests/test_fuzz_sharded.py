"""The fuzz harness on inputs sharded over 8 simulated CPU devices (issue 22, done-when).

Every entry of ``tests/test_fuzz.py``'s table, with inputs drawn by its builders and
mutated by its value mutations, put on an 8-device CPU mesh: the harness's property
holds, and the outcome is the one on the gathered inputs. The work is done by
``tests/_fuzz_sharded.py`` in a subprocess (the device count is fixed when JAX starts).
Float32 only (``make test``): the sharded code paths are the same under x64. In
``make test`` one case an entry, its mutation enumerated (each of the 23 mutations once or
twice over the 44 entries; ~4 minutes of CPU); ``make fuzz`` draws 40 an entry.
"""

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_fuzz import TABLE  # noqa: E402

#: The 8-device CPU-mesh suites run in ``make test-mesh`` (CI), not in ``make test``.
pytestmark = pytest.mark.mesh

#: Seconds without a line from the subprocess (it prints one as each entry starts and
#: ends) that end it: a hang, not a slow machine (~1 min in all idle).
SHARDED_STALL = 180


@pytest.fixture(scope="module")
def sharded_fuzz():
    """Run ``tests/_fuzz_sharded.py`` once; its JSON lines by entry, and its output."""
    from tests._progress import run

    script = pathlib.Path(__file__).with_name("_fuzz_sharded.py")
    proc = run([sys.executable, str(script)], stall=SHARDED_STALL, cwd=script.parents[1])
    output, code, stderr = proc.stdout, proc.returncode, proc.stderr
    if proc.stalled_after is not None:
        stderr = f"no progress for {proc.stalled_after:.0f} s (a hang)\n{stderr[-3000:]}"
    lines = {}
    for line in output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            lines[record["entry"]] = record
    return lines, output, stderr, code


@pytest.mark.parametrize("entry", TABLE, ids=[e.name for e in TABLE])
def test_sharded_inputs_reject_or_match(sharded_fuzz, entry):
    """On inputs sharded over 8 CPU devices: the property above, and the same outcome.

    The same exception class as, or results equal to, the call on the gathered inputs,
    eagerly and under ``jit`` (``tests/_fuzz_sharded.py``; a subprocess because the
    device count is fixed when JAX starts). An abort or a hang fails the entry it
    happened in and every entry after it.
    """
    lines, output, stderr, code = sharded_fuzz
    if entry.name not in lines:
        started = [x for x in output.splitlines() if x.startswith("start ")]
        pytest.fail(
            f"{entry.name}: no result (exit status {code}; last started: "
            f"{started[-1] if started else None}); stderr tail:\n{stderr[-2000:]}"
        )
    record = lines[entry.name]
    assert record["ok"], record["message"]
