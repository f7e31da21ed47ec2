"""The adapters and the stateful workflows on an 8-device CPU mesh (issue 19, item 1).

Suite ``workflows`` of ``tests/_sharded_inputs.py``, compared as the other suites with
the same calls in this one-device process (integers exactly, floats to 1e-6 of their
array's largest magnitude):

- ``bayescal.numpyro`` (``pit``, plain and randomized; ``rao_blackwell_pit``, of a
  Normal and, with a key, a Poisson site; ``predictive_moments``,
  ``predictive_probs``, ``loo_pit``, Rao-Blackwellized and counting): predictive
  draws, ``y_true`` and the model's inputs sharded over the observation axis
  (``*_obs``), or the posterior samples / predictive draws sharded over the draws
  axis (``*_draws``); eagerly and under ``jit`` (``loo_pit``, whose PSIS runs in
  ArviZ on the host, eagerly).
- ``bayescal.arviz`` (``pit``, randomized ``pit``, ``loo_pit``): ArviZ holds numpy
  arrays, so nothing is sharded; they run in the 8-device process (default placement).
- ``classification.cross_calibrate`` (isotonic per fold; Platt pooled) on sharded
  features and labels, eagerly (it calls a Python training callback).
- ``reliability_accumulator`` (plain and weighted) and ``calibration_accumulator``
  (quantile and interval): two sharded halves updated separately, merged, finalized.
- ``regression.pit_ecdf_band`` (whose key and ``n`` are not arrays): bit for bit the
  one-device band drawn with ``jax.random`` (``bands.xla_draws``), as on the mesh.
- ``save_calibrator`` of calibrators fitted on sharded data (eagerly and under
  ``jit``): the file loads in this one-device process and predicts what the unsharded
  fit predicts.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _sharded_inputs as S  # noqa: E402

#: The 8-device CPU-mesh suites run in ``make test-mesh`` (CI), not in ``make test``.
pytestmark = pytest.mark.mesh
SUITE = "workflows"
#: Seconds without progress (no case started or finished) that end a subprocess: a
#: hang, not a slow machine (a case takes ~5 s idle, 35 s at load 8; an abort 40 s).
STALL = 180


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("sharded_workflows")
    return out_dir, S.run_suite(out_dir, SUITE, STALL)


@pytest.mark.parametrize(("name", "mode"), S.run_names(SUITE))
def test_sharded_input_equals_unsharded(sharded_run, name, mode):
    S.check_run(*sharded_run, SUITE, name, mode)
