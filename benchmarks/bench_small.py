"""Small inputs: warm eager calls at n = 1e3 and 1e4 against the NumPy peers.

The issue "First result fast", item 5: at n <= 1e4 a call's fixed costs (jit dispatch,
the transfer of the inputs, the sync of the check flags) dominate, and the NumPy
packages are fast there. bayescal answers concrete CPU inputs of at most
``bayescal._src.host.HOST_MAX`` values on the host, in NumPy (the ``_twin_*`` functions beside each kernel);
the rows below time that path against

- ``probcal.metrics`` (0.4) and scikit-learn for the Brier score and the log-loss,
- ``probcal.metrics.ece(strategy="width")`` for the ECE (15 equal-width bins on
  [0, 1], count-weighted mean gap: the same quantity),
- crepes' ``ConformalRegressor().fit(y - mu).predict_int(mu, confidence=0.9)`` for
  split conformal (``fit_conformal(y, mu, alpha=0.1)`` then the calibrator on ``mu``:
  both take the ``ceil((n + 1) 0.9)``-th smallest absolute residual), and per group
  (Mondrian, 5 groups: ``groups=`` / crepes' ``bins=``),
- MAPIE's ``TimeSeriesRegressor(method="aci", cv="prefit")`` point by point for
  adaptive conformal inference over a stream (``aci_rows``), and its
  ``CrossConformalRegressor`` for CV+ (``cv_plus_rows``), and crepes' ``SimpleJumper``
  for the PIT test martingale (``martingale_rows``),
- crepes' ``ConformalPredictiveSystem().fit(y - mu).predict_int(mu, confidence=0.8)``
  for the conformal predictive system (``fit_conformal_predictive(y, mu)(mu)
  .interval(0.8)``),

and against bayescal's own kernel path (``host.disabled()``: the one compiled program
of checks and kernel, as before). Inputs are numpy float64 arrays, as a user's; every
result is checked to agree with the peer's before timing. One call is a few
microseconds, so each sample is the mean of a loop of calls and the time is the median
of the samples.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import block, row

NUM_BINS = 15


def per_call(
    *fns: Callable[[], Any], budget: float = 0.2, samples: int = 21
) -> list[float]:
    """Seconds per call of each of ``fns``: the median over ``samples`` of a loop's mean.

    The samples of the functions alternate, so that a shared machine's load changes
    hit them alike.
    """
    numbers = []
    for fn in fns:
        block(fn())
        t0 = time.perf_counter()
        block(fn())
        once = max(time.perf_counter() - t0, 1e-7)
        numbers.append(max(1, int(budget / samples / once)))
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for fn, number, acc in zip(fns, numbers, times, strict=True):
            t0 = time.perf_counter()
            for _ in range(number):
                out = fn()
            block(out)
            acc.append((time.perf_counter() - t0) / number)
    return [statistics.median(t) for t in times]


def _agree(ours: Any, ref: Any, name: str) -> None:
    np.testing.assert_allclose(
        np.asarray(ours, np.float64), ref, rtol=1e-5, atol=1e-6, err_msg=name
    )


def main(quick: bool = False) -> list[dict]:
    import probcal.metrics as pm
    from crepes import ConformalPredictiveSystem, ConformalRegressor
    from sklearn.metrics import brier_score_loss
    from sklearn.metrics import log_loss as sk_log_loss

    from bayescal._src import host
    from bayescal.classification import brier_score, expected_calibration_error, log_loss
    from bayescal.regression import fit_conformal, fit_conformal_predictive

    budget = 0.05 if quick else 0.2
    rows = []
    for n in (1_000, 10_000):
        tag = f"1e{len(str(n)) - 1}"
        rng = np.random.default_rng(n)
        p = rng.uniform(0.01, 0.99, size=n)
        y = (rng.uniform(size=n) < p**1.3).astype(np.float64)
        mu = rng.normal(size=n)
        yy = mu + rng.normal(size=n)

        def conformal(mu=mu, yy=yy):
            return fit_conformal(yy, mu, alpha=0.1)(mu)

        def crepes(mu=mu, yy=yy):
            return ConformalRegressor().fit(yy - mu).predict_int(mu, confidence=0.9)

        groups = rng.integers(0, 5, size=n)

        def mondrian(mu=mu, yy=yy, g=groups):
            return fit_conformal(yy, mu, alpha=0.1, groups=g)(mu, groups=g)

        def crepes_mondrian(mu=mu, yy=yy, g=groups):
            # crepes takes int((1 - confidence)(n + 1)) in floats: 1 - 0.9 is
            # 0.09999999999999998, one rank short where n + 1 is a multiple of 10 (a
            # group of 1,999 here); 0.9 - 1e-12 gives it the exact rank, as bayescal's
            return ConformalRegressor().fit(yy - mu, bins=g).predict_int(
                mu, bins=g, confidence=0.9 - 1e-12
            )

        def cps(mu=mu, yy=yy):
            return fit_conformal_predictive(yy, mu)(mu).interval(0.8)

        def crepes_cps(mu=mu, yy=yy):
            return ConformalPredictiveSystem().fit(yy - mu).predict_int(mu, confidence=0.8)

        def ece(y=y, p=p):
            return expected_calibration_error(y, p, bins=NUM_BINS)

        cases = [
            (
                f"ECE {NUM_BINS} bins n={tag}",
                ece,
                [
                    (
                        "probcal ece(strategy='width')",
                        lambda y=y, p=p: pm.ece(y, p, n_bins=NUM_BINS, strategy="width"),
                    )
                ],
            ),
            (
                f"Brier score n={tag}",
                lambda y=y, p=p: brier_score(y, p),
                [
                    ("probcal brier_score", lambda y=y, p=p: pm.brier_score(y, p)),
                    ("sklearn brier_score_loss", lambda y=y, p=p: brier_score_loss(y, p)),
                ],
            ),
            (
                f"log-loss n={tag}",
                lambda y=y, p=p: log_loss(y, p),
                [
                    ("probcal log_loss", lambda y=y, p=p: pm.log_loss(y, p)),
                    ("sklearn log_loss", lambda y=y, p=p: sk_log_loss(y, p)),
                ],
            ),
            (
                f"split conformal fit+apply n={tag}",
                conformal,
                [("crepes ConformalRegressor", crepes)],
            ),
            (
                f"Mondrian conformal fit+apply n={tag}",
                mondrian,
                [("crepes ConformalRegressor bins=", crepes_mondrian)],
            ),
            (
                f"conformal predictive fit+interval n={tag}",
                cps,
                [("crepes ConformalPredictiveSystem", crepes_cps)],
            ),
        ]
        for name, ours, peers in cases:
            out = ours()
            with host.disabled():
                kernel = ours()
            for a, b in zip(np.atleast_1d(out), np.atleast_1d(kernel), strict=True):
                _agree(a, np.asarray(b, np.float64), f"{name}: host vs kernel path")
            for _, peer in peers:
                ref = peer()
                if peer in (crepes, crepes_mondrian, crepes_cps):
                    ref = (ref[:, 0], ref[:, 1])
                for a, b in zip(np.atleast_1d(out), np.atleast_1d(ref), strict=True):
                    _agree(a, b, f"{name}: vs {peer}")

            def kernel_path(ours=ours):
                with host.disabled():
                    return ours()

            t_ours, t_kernel, *t_peers = per_call(
                ours, kernel_path, *[peer for _, peer in peers], budget=budget
            )
            for (peer_name, _), t_peer in zip(peers, t_peers, strict=True):
                rows.append(row(name, t_ours, t_peer, peer_name))
            rows.append(row(name, t_ours, t_kernel, "bayescal kernel path (host off)"))
    rows += aci_rows(quick)
    rows += cv_plus_rows(quick)
    rows += martingale_rows(quick)
    print_us(rows)
    return rows


def aci_rows(quick: bool = False) -> list[dict]:
    """Adaptive conformal inference over a stream of 1,000 points (fixed calibration
    scores, 200 of them) against MAPIE's ``TimeSeriesRegressor(method="aci",
    cv="prefit")`` with symmetric absolute scores, which predicts and adapts point by
    point (its documented use); the intervals are checked equal first."""
    import warnings

    from mapie.conformity_scores import AbsoluteConformityScore
    from mapie.regression import TimeSeriesRegressor
    from sklearn.linear_model import LinearRegression

    from bayescal.regression import adaptive_conformal_intervals

    r = np.random.default_rng(0)
    x = r.normal(size=(1400, 2))
    y = x @ np.array([1.0, 2.0]) + (1 + np.arange(1400) / 2000) * r.normal(size=1400)
    est = LinearRegression().fit(x[:200], y[:200])
    cal, stream = slice(200, 400), slice(400, None)
    scores = np.abs(y[cal] - est.predict(x[cal]))
    loc = est.predict(x[stream])

    # gamma: in this stream no level alpha_t puts ceil((1 - alpha_t) 201) within float32
    # rounding of an integer (0.002 did, 3 times), so the float32 intervals equal MAPIE's
    def ours():
        return adaptive_conformal_intervals(y[stream], loc, scores, gamma=0.00317)

    def mapie():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = TimeSeriesRegressor(
                est, method="aci", cv="prefit", conformity_score=AbsoluteConformityScore()
            ).fit(x[cal], y[cal])
            out = []
            for t in range(400, 1400):
                _, b = m.predict(x[t : t + 1], confidence_level=0.9, allow_infinite_bounds=True)
                out.append(b[0, :, 0])
                m.adapt_conformal_inference(
                    x[t : t + 1], y[t : t + 1], gamma=0.00317, confidence_level=0.9
                )
        return np.array(out)

    got, ref = ours(), mapie()
    _agree(got.lower, ref[:, 0], "ACI lower vs MAPIE")
    _agree(got.upper, ref[:, 1], "ACI upper vs MAPIE")
    t_ours, t_mapie = per_call(ours, mapie, budget=0.05 if quick else 0.5, samples=3)
    return [row("ACI stream T=1e3 (n=200 scores)", t_ours, t_mapie, "MAPIE TimeSeriesRegressor aci")]


def cv_plus_rows(quick: bool = False) -> list[dict]:
    """CV+ with 5 folds of a scikit-learn Ridge on 1,000 rows, intervals at 1,000 new
    rows, against MAPIE's ``CrossConformalRegressor(method="plus", cv=KFold(5))``: the
    same five fits, so the difference is the conformal part; intervals checked equal."""
    import warnings

    from mapie.regression import CrossConformalRegressor
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import KFold

    from bayescal.regression import fit_cross_conformal

    r = np.random.default_rng(1)
    X = r.normal(size=(2000, 5))
    y = X @ r.normal(size=5) + r.standard_t(4, 2000)
    X, Xt, y = X[:1000], X[1000:], y[:1000]

    def ours():
        cv = fit_cross_conformal(
            lambda a, b: Ridge().fit(a, b), lambda m, a: m.predict(a), X, y, folds=5
        )
        return cv.interval(Xt)

    def mapie():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = CrossConformalRegressor(Ridge(), confidence_level=0.9, cv=KFold(5))
            return m.fit_conformalize(X, y).predict_interval(Xt)[1][:, :, 0]

    got, ref = ours(), mapie()
    _agree(got[0], ref[:, 0], "CV+ lower vs MAPIE")
    _agree(got[1], ref[:, 1], "CV+ upper vs MAPIE")
    t_ours, t_mapie = per_call(ours, mapie, budget=0.05 if quick else 0.5, samples=5)
    rows = [row("CV+ 5 folds n=1e3, 1e3 new rows", t_ours, t_mapie, "MAPIE CrossConformalRegressor")]

    # J+aB on MAPIE's own 20 resamples (Subsample(20, random_state=0))
    from mapie.regression import JackknifeAfterBootstrapRegressor
    from mapie.subsample import Subsample

    from bayescal.regression import fit_jackknife_after_bootstrap

    trains = np.array([t for t, _ in Subsample(n_resamplings=20, random_state=0).split(X)])

    def ours_jab():
        jab = fit_jackknife_after_bootstrap(
            lambda a, b: Ridge().fit(a, b), lambda m, a: m.predict(a), X, y, resamples=trains
        )
        return jab.interval(Xt)

    def mapie_jab():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = JackknifeAfterBootstrapRegressor(
                Ridge(), confidence_level=0.9, resampling=Subsample(20, random_state=0)
            )
            return m.fit_conformalize(X, y).predict_interval(Xt)[1][:, :, 0]

    got, ref = ours_jab(), mapie_jab()
    _agree(got[0], ref[:, 0], "J+aB lower vs MAPIE")
    _agree(got[1], ref[:, 1], "J+aB upper vs MAPIE")
    t_ours, t_mapie = per_call(ours_jab, mapie_jab, budget=0.05 if quick else 0.5, samples=5)
    rows.append(
        row("J+aB 20 resamples n=1e3, 1e3 new", t_ours, t_mapie, "MAPIE JackknifeAfterBootstrap")
    )
    return rows


def martingale_rows(quick: bool = False) -> list[dict]:
    """The Simple Jumper test martingale over 10,000 PIT values against crepes'
    ``SimpleJumper().apply`` (a Python loop); values checked equal first."""
    from crepes.martingales import SimpleJumper

    from bayescal.regression import pit_martingale

    u = np.random.default_rng(2).uniform(size=10_000) ** 1.05
    _agree(pit_martingale(u).values, SimpleJumper().apply(u), "martingale vs crepes")
    t_ours, t_peer = per_call(
        lambda: pit_martingale(u), lambda: SimpleJumper().apply(u),
        budget=0.05 if quick else 0.5, samples=5,
    )
    return [row("PIT martingale T=1e4", t_ours, t_peer, "crepes SimpleJumper")]


def print_us(rows: list[dict]) -> None:
    """The rows in microseconds (the shared table's milliseconds round these away)."""
    print(
        f"| {'benchmark':<34} | {'bayescal (us)':>13} | {'peer':<32} | {'peer (us)':>9} | ratio |"
    )
    print(f"|{'-' * 36}|{'-' * 15}|{'-' * 34}|{'-' * 11}|-------|")
    for r in rows:
        print(
            f"| {r['benchmark']:<34} | {r['bayescal_ms'] * 1e3:>13.1f} | {r['peer']:<32} | "
            f"{r['peer_ms'] * 1e3:>9.1f} | {r['speedup']:>4.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))
    main(quick="--quick" in sys.argv)
