"""Public calls from several threads at once finish (issue "Nothing lost, round 2").

8 threads calling ``fit_isotonic`` (and the other fits whose kernels run scipy's PAV or
the Venn-ABERS hulls in a host callback) at N = 40,000 hung forever: every worker
thread of JAX's CPU runtime was a callback waiting for the asynchronous copy of its
operands that only such a thread can make. Run in a subprocess (a hang must not hang
the suite), ended when it prints nothing for ``STALL`` seconds: each call prints a line
when its threads are done (~1-2 s each on a quiet 2-core machine), so only a hang is
that silent.
"""

import os
import sys
import textwrap

from tests._progress import run

STALL = 120.0

SCRIPT = textwrap.dedent(
    """
    import threading
    import numpy as np
    import bayescal.classification as bc
    from bayescal.core import isotonic_regression

    rng = np.random.default_rng(0)
    n = 40_000
    p = rng.uniform(size=n)
    y = (rng.uniform(size=n) < p).astype(float)
    probs = rng.dirichlet(np.ones(3), size=n)
    labels = rng.integers(0, 3, size=n)
    calls = {
        "fit_isotonic": lambda: bc.fit_isotonic(y, p).thresholds,
        "fit_venn_abers": lambda: bc.fit_venn_abers(y, p).p0_table,
        "fit_cross_venn_abers": lambda: bc.fit_cross_venn_abers(y, p, np.arange(n) % 5).p0_table,
        "fit_centered_isotonic": lambda: bc.fit_centered_isotonic(y, p).values,
        "isotonic_calibration_index": lambda: bc.isotonic_calibration_index(y, p),
        "fit_top_label": lambda: bc.fit_top_label(labels, probs, method="isotonic")(probs)[1],
        "fit_one_vs_rest": lambda: bc.fit_one_vs_rest(labels, probs, method="isotonic")(probs),
        "isotonic_regression": lambda: isotonic_regression(p),
    }
    for name, call in calls.items():
        want = np.asarray(call())
        got = [None] * 8

        def work(i, call=call):
            got[i] = np.asarray(call())

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        same = all(g is not None and np.array_equal(g, want, equal_nan=True) for g in got)
        print(name, "same" if same else "DIFFERENT", flush=True)
    """
)


def test_eight_threads_calling_fits_with_host_callbacks_finish_with_the_serial_answer():
    # The kernel path (the host path's NumPy twins run no callback) at every size.
    env = dict(os.environ, BAYESCAL_HOST_PATH="0")
    out = run([sys.executable, "-c", SCRIPT], stall=STALL, env=env)
    assert out.stalled_after is None, (
        f"no progress for {out.stalled_after:.0f} s (a hang); finished:\n{out.stdout}"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.split("\n")
    finished = dict(line.split() for line in lines if line.strip())
    assert len(finished) == 8, out.stdout
    assert set(finished.values()) == {"same"}, out.stdout
