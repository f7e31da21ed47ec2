"""Every other public function on inputs sharded over an 8-device CPU mesh (issue 19, item 1).

The metrics, bands, tests, calibrators (fitted on sharded data and applied to it) and
``core`` functions of both branches, called eagerly and under ``jit`` with their
observation axis sharded over 8 simulated CPU devices (N = 32,768, the size at which
host callbacks and collectives inside loops aborted the process), equal the unsharded
result in this one-device process: integers exactly, floats to 1e-6 of their array's
largest magnitude (``_sharded_inputs.TOLERANCE`` lists the exceptions, with reasons).
The non-default options run as cases of their own (each at least once, not the
cross product): explicit bin edges, ``strategy="quantile"``, ``norm="l2"`` and
``"max"``, ``debias=True``, ``kind="interval"``, ``method="bayesian"`` bootstraps,
``weights=`` and ``reduction="none"`` / ``"sum"``.
Found this way: ``smooth_reliability_band`` under ``jit`` aborted (an all-reduce
rendezvous timeout inside its resampling loop); it now resamples the gathered data.
The PAV-based functions are in ``tests/test_sharded_inputs.py``, the adapters, the
accumulators, ``cross_calibrate``, ``pit_ecdf_band`` and saved calibrators in
``tests/test_sharded_workflows.py``; the harness is ``tests/_sharded_inputs.py``
(suite ``public``).
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sharded_inputs as S  # noqa: E402

#: The 8-device CPU-mesh suites run in ``make test-mesh`` (CI), not in ``make test``.
pytestmark = pytest.mark.mesh
SUITE = "public"
#: Seconds without progress (no case started or finished) that end a subprocess: a
#: hang, not a slow machine (a case takes ~5 s idle, 35 s at load 8; an abort 40 s).
STALL = 180


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("sharded_public")
    return out_dir, S.run_suite(out_dir, SUITE, STALL)


@pytest.mark.parametrize(("name", "mode"), S.run_names(SUITE))
def test_sharded_input_equals_unsharded(sharded_run, name, mode):
    S.check_run(*sharded_run, SUITE, name, mode)
