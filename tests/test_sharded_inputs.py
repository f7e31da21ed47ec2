"""The PAV-based functions on inputs sharded over an 8-device CPU mesh equal the unsharded ones.

Issue 22, item 4: sharded inputs to the PAV-based functions aborted the process (an
all-reduce rendezvous timeout after 40 s, SIGABRT) at N = 32,768 on 8 devices, eagerly
and under ``jit``: ``brier_decomposition``, ``corp_curve`` (with and without a key;
with 50 resamples already at N = 2,000), ``fit_isotonic``, isotonic
``fit_one_vs_rest`` and ``core.isotonic_regression``. The host callbacks (PAV, tie
pooling, sorting) ran on device 0 while the other devices waited. With several
devices they now run in XLA, on the whole array gathered explicitly to every device
(``sorting.gather_whole``, whose size guard raises a ValueError that says what to do).

The sharded calls run in a subprocess (``tests/_sharded_inputs.py``, suite ``pav``,
every case eagerly and under ``jit``) with a timeout: an abort or a hang fails its case
instead of blocking the suite, and the cases after it run in a fresh subprocess. Each
result is compared here with the same function on the unsharded inputs in this
(one-device) process, whose PAV is the host one: integers exactly, floats to 1e-6.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sharded_inputs as S  # noqa: E402

#: The 8-device CPU-mesh suites run in ``make test-mesh`` (CI), not in ``make test``.
pytestmark = pytest.mark.mesh
SUITE = "pav"
#: Seconds without progress (no case started or finished) that end a subprocess: a
#: hang, not a slow machine (a case takes ~5 s idle, 35 s at load 8; an abort 40 s).
STALL = 180


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("sharded")
    return out_dir, S.run_suite(out_dir, SUITE, STALL)


@pytest.mark.parametrize(("name", "mode"), S.run_names(SUITE))
def test_sharded_input_equals_unsharded(sharded_run, name, mode):
    S.check_run(*sharded_run, SUITE, name, mode)
