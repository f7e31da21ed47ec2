"""``bayescal demo``: the main job on bundled real data."""

from __future__ import annotations

import contextlib
import json
import pathlib
import sys
import time
import warnings
from collections.abc import Iterator

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from bayescal import regression as reg
from bayescal._cli.evaluate import (
    _regression_pvalues,
    classification_pvalues,
    p_cell,
    wilson_interval,
)
from bayescal._cli.output import check_target, staged_output
from bayescal._cli.report import format_table
from bayescal.arviz import PARETO_K_THRESHOLD
from bayescal.core import paired_interval
from bayescal.datasets import load_diabetes

LEVELS_90 = 0.9


@contextlib.contextmanager
def _progress_stream() -> Iterator[None]:
    """The sampler's progress bar redraws its line with ``\\r``, which the command
    line's stderr writes escaped (``bayescal.cli._Escaping``): while it samples, which
    prints no user data, stderr is the terminal's own stream."""
    wrapped = sys.stderr
    sys.stderr = getattr(wrapped, "unescaped", wrapped)
    try:
        yield
    finally:
        sys.stderr = wrapped


def _split(n: int, rng: np.random.Generator, fractions=(0.5, 0.25)):
    idx = rng.permutation(n)
    a = int(fractions[0] * n)
    b = a + int(fractions[1] * n)
    return idx[:a], idx[a:b], idx[b:]


def _standardize(train: np.ndarray, *others: np.ndarray):
    mean, sd = train.mean(0), train.std(0)
    return [(x - mean) / sd for x in (train, *others)], (mean, sd)


def _poisson_model(X, y=None):
    """Poisson regression with a log link: simple, and blind to overdispersion."""
    import numpyro
    import numpyro.distributions as dist

    alpha = numpyro.sample("alpha", dist.Normal(5.0, 1.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 0.5).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("obs", dist.Poisson(jnp.exp(alpha + X @ beta)), obs=y)


def _poisson_mixture_cdf(lam: ArrayLike, k_max: int) -> np.ndarray:
    """``F_i(k) = mean_s P(Y <= k | lambda_si)`` for ``k = 0..k_max``: [k_max + 1, N].

    The posterior mixture's CDF on the integers, from its probability mass function
    summed in float64 on the host: ``pmf_i(k) = mean_s exp(k log lambda - lambda -
    lgamma(k + 1))``, one ``exp`` per draw and count, where the regularized incomplete
    gamma function ``gammaincc(k + 1, lambda)`` iterates to convergence (float32: 23 s
    for the demo's 693 x 1000 x 111 grid on the 2-core machine, against ~1 s here, and
    within ~1e-14 of scipy's CDF instead of ~1e-6).
    """
    from scipy.special import gammaln

    lam = np.asarray(lam, dtype=np.float64)
    if lam.ndim != 2 or np.any(~np.isfinite(lam)) or np.any(lam <= 0):
        raise ValueError(
            f"lam must be finite positive Poisson rates of shape [S, N]; got shape {lam.shape}."
        )
    log_lam = np.log(lam)
    pmf = np.empty((k_max + 1, lam.shape[1]))
    for k in range(k_max + 1):
        pmf[k] = np.exp(k * log_lam - lam - gammaln(k + 1.0)).mean(axis=0)
    return np.cumsum(pmf, axis=0)


def _quantiles_from_cdf(cdf: np.ndarray, levels: ArrayLike) -> np.ndarray:
    """Quantiles ``min{k: F_i(k) >= level}`` from a CDF table ``[K, N]``: [L, N].

    A binary search on the integers per observation (``np.searchsorted``, the
    bisection of tutorial 1 run on the table); a level above ``F_i(K - 1)`` gives ``K``.
    """
    lv = np.asarray(levels, dtype=np.float64).reshape(-1)
    return np.stack(
        [np.searchsorted(cdf[:, i], lv, side="left") for i in range(cdf.shape[1])], axis=1
    ).astype(np.float64)


def _regression_rows(samples, X_train, y_train, X_cal, y_cal, X_test, y_test, key):
    """Metrics on the test split: raw model, isotonic recalibration fitted on the
    calibration split and, split-free, on the LOO-PIT of the training data, and
    sigma-scaling."""
    from bayescal import numpyro as bn

    levels = jnp.linspace(0.01, 0.99, 99)
    k_max = int(2 * max(float(y_test.max()), float(y_cal.max())))
    k_cal, k_test, k_loo = jax.random.split(key, 3)
    k_pvalues = jax.random.fold_in(key, 3)

    # Rao-Blackwellized PIT: u = mean_s F(y | theta_s) from the Poisson site itself,
    # randomized between F(y - 1) and F(y) because the data are counts.
    u_cal = bn.rao_blackwell_pit(_poisson_model, samples, y_cal, X_cal, key=k_cal)
    u_raw = bn.rao_blackwell_pit(_poisson_model, samples, y_test, X_test, key=k_test)
    # Predictive mean and variance (law of total variance) for sigma-scaling.
    loc_c, var_c = bn.predictive_moments(_poisson_model, samples, X_cal)
    loc_t, var_t = bn.predictive_moments(_poisson_model, samples, X_test)

    iso = reg.fit_isotonic_recalibrator(u_cal)
    # Split-free: PSIS-LOO PIT of the training data (no refit, no calibration split).
    # The Pareto-k warning is reported in the table's notes instead.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Pareto k values exceed.*", category=UserWarning)
        loo = bn.loo_pit(_poisson_model, samples, y_train, X_train, key=k_loo)
    iso_loo = reg.fit_isotonic_recalibrator(loo.pit)
    sig = reg.fit_sigma_scaling(y_cal, loc_c, jnp.sqrt(var_c))
    sd_t = jnp.sqrt(var_t)
    lam_test = jnp.exp(samples["alpha"][:, None] + samples["beta"] @ X_test.T)
    cdf_test = _poisson_mixture_cdf(lam_test, k_max)
    q_raw = _quantiles_from_cdf(cdf_test, levels)
    u_iso, u_iso_loo = iso(u_raw), iso_loo(u_raw)

    def quantile_fn(r):
        return _quantiles_from_cdf(cdf_test, r)

    q_iso = reg.recalibrated_quantiles(iso, levels, quantile_fn=quantile_fn)
    q_iso_loo = reg.recalibrated_quantiles(iso_loo, levels, quantile_fn=quantile_fn)
    u_sig = reg.pit_normal(y_test, loc_t, sig(sd_t))
    q_sig = reg.recalibrated_quantiles(sig, levels, loc=loc_t, scale=sd_t)

    y_np = np.asarray(y_test, np.float64)
    lv = np.asarray(levels, np.float64)[:, None]

    def crps_cases(q):
        """Each case's CRPS: twice the mean pinball loss over the 99 levels."""
        d = y_np[None, :] - np.asarray(q, np.float64)
        return 2 * np.mean(np.maximum(lv * d, (lv - 1) * d), axis=0)

    crps_raw = crps_cases(q_raw)
    rows = []
    for i, (name, u, q) in enumerate([
        ("Poisson model", u_raw, q_raw),
        ("+ isotonic", u_iso, q_iso),
        ("+ isotonic, split-free (LOO)", u_iso_loo, q_iso_loo),
        ("+ sigma-scaling", u_sig, q_sig),
    ]):
        lo, hi = q[4], q[94]  # 5% and 95% levels: central 90% interval
        covered = int(jnp.sum((y_test >= lo) & (y_test <= hi)))
        # the same key for every row: the rows' p-values share their null samples
        pvalues, _ = _regression_pvalues(u, k_pvalues, num_levels=100)
        crps = crps_cases(q)
        rows.append(
            {
                "method": name,
                "MACE (quantile)": float(reg.calibration_error(u)),
                "MACE (interval)": float(reg.calibration_error(u, kind="interval")),
                "area (quantile)": float(reg.miscalibration_area(u)),
                "area (interval)": float(reg.miscalibration_area(u, kind="interval")),
                "p-values": {kind: {"MACE": v["MACE"], "area": v["area (exact)"]}
                             for kind, v in pvalues.items()},
                "90% coverage": covered / y_np.size,
                "90% coverage, 95% Wilson interval": list(wilson_interval(covered, y_np.size)),
                "90% width": float(jnp.mean(hi - lo)),
                "CRPS": float(np.mean(crps)),
                "CRPS minus the model's": _difference(crps - crps_raw) if i else None,
            }
        )
    k = np.asarray(loo.pareto_k, np.float64)
    bad = int(np.sum(~(k <= PARETO_K_THRESHOLD)))  # NaN counts as bad, as in bayescal.arviz
    extras = {
        "sigma_scaling_factor": float(sig.factor),
        "loo": {
            "MACE (quantile), training data": float(reg.calibration_error(loo.pit)),
            "pareto_k_max": float(np.nanmax(k)),
            "pareto_k_above_0.7": bad,
            "n_train": int(k.size),
        },
    }
    if bad:
        extras["loo"]["warning"] = (
            f"warning: PSIS-LOO is unreliable here: {bad} of {k.size} training cases have "
            f"Pareto k > {PARETO_K_THRESHOLD} (max {np.nanmax(k):.2f}; ArviZ's threshold), so "
            "the split-free row [!]\nrests on LOO-PIT values that may be far off. Trust "
            "the calibration-split rows, or refit without those cases (exact LOO)."
        )
    pits = {
        "Poisson model": u_raw,
        "+ isotonic": u_iso,
        "+ isotonic, split-free (LOO)": u_iso_loo,
        "+ sigma-scaling": u_sig,
    }
    return rows, extras, pits


def _difference(d: np.ndarray) -> dict:
    """A paired difference's mean with its Student's t 95% interval."""
    mean, half = paired_interval(d)
    return {"mean": mean, "95% interval": [mean - half, mean + half]}


def _interval(lo: float, hi: float) -> str:
    return f"[{lo:.3f}, {hi:.3f}]"


def _regression_table(rows, warn_loo: str | None) -> str:
    """The regression rows as printed: each error with its p-value (a Monte Carlo test of
    perfect calibration), coverage with its Wilson interval, and the CRPS difference to
    the model with its paired 95% interval."""
    header = ["method", "MACE", "p-value", "area (interval)", "p-value", "90% coverage",
              "95% interval", "90% width", "CRPS", "- model's (95%)"]
    body = []
    for r in rows:
        d = r["CRPS minus the model's"]
        body.append([
            r["method"] + (" [!]" if warn_loo and "LOO" in r["method"] else ""),
            r["MACE (quantile)"], p_cell(r["p-values"]["quantile"]["MACE"]),
            r["area (interval)"], p_cell(r["p-values"]["interval"]["area"]),
            r["90% coverage"], _interval(*r["90% coverage, 95% Wilson interval"]),
            r["90% width"], r["CRPS"],
            "" if d is None else "{:+.2f} [{:+.2f}, {:+.2f}]".format(d["mean"], *d["95% interval"]),
        ])
    return format_table(header, body, digits=3)


def _classification_table(rows) -> str:
    """The classifier rows as printed: ECE and Brier with their p-values, and the
    scores' differences to the model with their paired 95% intervals."""
    header = ["method", "ECE", "p-value", "ECE (debiased L2)", "p-value", "Brier",
              "p-value", "- model's (95%)", "CORP MCB", "CORP DSC", "log-loss",
              "- model's (95%)"]

    def diff(d):
        if d is None:
            return ""
        if not np.isfinite(d["mean"]):
            return f"{d['mean']:+}"
        return "{:+.3f} [{:+.3f}, {:+.3f}]".format(d["mean"], *d["95% interval"])

    body = [[r["method"], r["ECE"], p_cell(r["p-values"]["ECE"]), r["ECE (debiased L2)"],
             p_cell(r["p-values"]["ECE (debiased L2)"]), r["Brier"],
             p_cell(r["p-values"]["Brier"]), diff(r["Brier minus the model's"]),
             r["CORP MCB"], r["CORP DSC"], r["log-loss"], diff(r["log-loss minus the model's"])]
            for r in rows]
    return format_table(header, body, digits=3)


def _logistic_model(X, y=None):
    """Logistic regression: a deliberately simple classifier."""
    import numpyro
    import numpyro.distributions as dist

    alpha = numpyro.sample("alpha", dist.Normal(0.0, 2.0))
    beta = numpyro.sample("beta", dist.Normal(0.0, 2.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("obs", dist.Bernoulli(logits=alpha + X @ beta), obs=y)


CLASSIFIER_FEATURES = ("worst_radius", "worst_texture", "worst_smoothness")


def _classification_part(seed, num_samples, num_warmup, progress):
    """Breast-cancer data, logistic regression, Platt and isotonic on a calibration split."""
    from numpyro.infer import MCMC, NUTS

    from bayescal import classification as clf
    from bayescal import numpyro as bn
    from bayescal.datasets import load_breast_cancer

    data = load_breast_cancer()
    cols = [data.feature_names.index(f) for f in CLASSIFIER_FEATURES]
    X, y = data.X[:, cols], data.y
    rng = np.random.default_rng(seed + 1)
    tr, ca, te = _split(len(y), rng, fractions=(0.3, 0.35))
    (X_tr, X_ca, X_te), _ = _standardize(X[tr], X[ca], X[te])
    print(
        f"\nBreast cancer data (Wolberg et al. 1995): {len(y)} cases -> {len(tr)} train / "
        f"{len(ca)} calibration / {len(te)} test.\n"
        f"Model: Bayesian logistic regression on {', '.join(CLASSIFIER_FEATURES)}."
    )
    mcmc = MCMC(
        NUTS(_logistic_model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        progress_bar=progress,
    )
    with _progress_stream():
        mcmc.run(jax.random.key(seed + 1), jnp.asarray(X_tr),
                 jnp.asarray(y[tr], dtype=jnp.float32))
    samples = mcmc.get_samples()
    p_ca = bn.predictive_probs(_logistic_model, samples, jnp.asarray(X_ca))
    p_te = bn.predictive_probs(_logistic_model, samples, jnp.asarray(X_te))
    y_ca, y_te = y[ca].astype(np.int32), y[te].astype(np.int32)
    # Confident cases round to probability 1.0 in float32, where logit(p) is infinite:
    # Platt's logit-scale fit needs an explicit clip.
    platt = clf.fit_platt(y_ca, p_ca, eps=1e-6)
    iso = clf.fit_isotonic(y_ca, p_ca)
    bins = 15  # the library's default, as everywhere else
    key = jax.random.fold_in(jax.random.key(seed), 4)
    rows, probs, base = [], {}, None
    for name, p in [
        ("logistic model", p_te),
        ("+ Platt", platt(p_te)),
        ("+ isotonic", iso(p_te)),
    ]:
        probs[name] = p
        dec = clf.brier_decomposition(y_te, p)
        # per-case scores for the paired differences to the model (in float64)
        p64 = np.asarray(p, np.float64)
        with np.errstate(divide="ignore"):
            cases = {"Brier": (y_te - p64) ** 2,
                     "log-loss": -np.log(np.where(y_te == 1, p64, 1 - p64))}
        base = base or cases
        pvalues = classification_pvalues(y_te, p, key, bins)
        rows.append(
            {
                "method": name,
                "ECE": float(clf.expected_calibration_error(y_te, p, bins=bins)),
                "ECE (debiased L2)": float(
                    clf.expected_calibration_error(
                        y_te, p, bins=bins, norm="l2", debias=True
                    )
                ),
                "Brier": float(clf.brier_score(y_te, p)),
                "CORP MCB": float(dec.miscalibration),
                "CORP DSC": float(dec.discrimination),
                "log-loss": float(clf.log_loss(y_te, p)),
                "p-values": {k: pvalues[k] for k in ("ECE", "ECE (debiased L2)", "Brier")},
                **{f"{m} minus the model's": (
                    _difference(cases[m] - base[m]) if cases is not base else None)
                   for m in ("Brier", "log-loss")},
            }
        )
    return rows, probs, y_te


def _write_plots(out_dir, pits, probs, y_te, key):
    """The three figures; ``key`` (from ``--seed``) draws the simulated bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayescal import plot

    k_curve, k_ecdf = jax.random.split(key)
    n_test = len(np.asarray(pits["Poisson model"]))
    written = []
    fig, ax = plt.subplots(figsize=(9.5, 5.2), layout="constrained")
    # the PIT values themselves: the legend's areas are the table's "area (interval)"
    plot.calibration_curve(
        {name: np.asarray(u) for name, u in pits.items()},
        ax=ax,
        kind="interval",
        key=k_curve,
    )
    ax.set_title(f"Diabetes, test split (n={n_test}): central-interval calibration")
    written.append(out_dir / "calibration_curve.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.5, 4.8), layout="constrained")
    plot.pit_ecdf(
        np.asarray(pits["Poisson model"]), ax=ax, key=k_ecdf, label="Poisson model"
    )
    ax.set_title(
        f"Diabetes, test split (n={n_test}): Poisson model's PIT ECDF\n"
        "with the 95% simultaneous band of a calibrated model"
    )
    written.append(out_dir / "pit_ecdf.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(
        1, len(probs), figsize=(5.2 * len(probs) + 2.6, 6.0), layout="constrained"
    )
    for i, (ax, (name, p)) in enumerate(zip(axes, probs.items(), strict=True)):
        plot.reliability_diagram(y_te, p, ax=ax)  # 15 bins, as the table
        ax.set_title(f"Breast cancer, test split (n={len(y_te)}):\n{name}")
        if i < len(probs) - 1:  # one legend, right of the last panel
            ax.get_legend().remove()
    written.append(out_dir / "reliability_diagram.png")
    fig.savefig(written[-1], dpi=110)
    plt.close(fig)
    return written


#: Every file the demo writes into --out: --force replaces these and nothing else.
REPORT_FILES = ("report.json", "calibration_curve.png", "pit_ecdf.png", "reliability_diagram.png")


def run_demo(
    *,
    out: str,
    seed: int = 0,
    num_samples: int = 1000,
    num_warmup: int = 500,
    progress: bool = True,
    force: bool = False,
) -> dict:
    """Run the demo, print the report and write it (JSON) into ``out``.

    The folder is written all at once when everything succeeded (see
    :func:`bayescal._cli.output.staged_output`); refused before any work: an existing
    non-empty ``out`` unless ``force``, and with or without it an ``out`` that is not a
    folder or holds a folder or special file named like a report file.
    """
    from numpyro.infer import MCMC, NUTS

    t0 = time.perf_counter()
    out_dir = pathlib.Path(out)
    check_target(out_dir, force=force, names=REPORT_FILES)
    rng = np.random.default_rng(seed)

    data = load_diabetes()
    tr, ca, te = _split(len(data.y), rng)
    (X_tr, X_ca, X_te), _ = _standardize(data.X[tr], data.X[ca], data.X[te])
    y_tr = data.y[tr]
    print(
        f"Diabetes data (Efron et al. 2004): {len(data.y)} patients -> "
        f"{len(tr)} train / {len(ca)} calibration / {len(te)} test.\n"
        "Model: Bayesian Poisson regression (log link) on 10 standardized features:\n"
        "deliberately simple, it ignores the overdispersion of the progression score."
    )
    key = jax.random.key(seed)
    k_mcmc, k_test = jax.random.split(key)
    mcmc = MCMC(
        NUTS(_poisson_model),
        num_warmup=num_warmup,
        num_samples=num_samples,
        progress_bar=progress,
    )
    with _progress_stream():
        mcmc.run(k_mcmc, jnp.asarray(X_tr), jnp.asarray(y_tr))
    samples = mcmc.get_samples()
    rows, extras, pits = _regression_rows(
        samples,
        jnp.asarray(X_tr),
        jnp.asarray(y_tr),
        jnp.asarray(X_ca),
        jnp.asarray(data.y[ca]),
        jnp.asarray(X_te),
        jnp.asarray(data.y[te]),
        k_test,
    )
    loo = extras["loo"]
    print(
        "\nRegression calibration on the test split (n = "
        f"{len(np.asarray(pits['Poisson model']))}; lower is better except coverage -> "
        "0.90):"
    )
    print(_regression_table(rows, loo.get("warning")))
    print(
        "p-value: Monte Carlo test of perfect calibration (1000 uniform PIT samples); "
        "intervals: 95%\n(coverage: Wilson; CRPS: paired Student's t over the test cases). "
        "Rows whose intervals overlap\ndiffer by noise.\n"
        "isotonic: fitted on the calibration split; split-free: fitted on the PSIS-LOO PIT "
        f"of the {loo['n_train']} training cases\n(no calibration data used; LOO-PIT "
        f"MACE on the training data {loo['MACE (quantile), training data']:.3f}, Pareto k "
        f"max {loo['pareto_k_max']:.2f}, {loo['pareto_k_above_0.7']} above 0.7).\n"
        f"sigma-scaling factor fitted on the calibration split: {extras['sigma_scaling_factor']:.3f}"
    )
    if loo.get("warning"):
        print(loo["warning"])

    c_rows, probs, y_te = _classification_part(seed, num_samples, num_warmup, progress)
    print("\nClassification calibration on the test split "
          f"(n = {len(y_te)}; lower is better except DSC):")
    print(_classification_table(c_rows))
    print(
        "ECE: 15 equal-width bins (the library's default). p-value: ECE by consistency "
        "resampling (Broecker & Smith 2007),\nBrier by Spiegelhalter's z-test; "
        "differences to the model: paired Student's t 95% intervals over the test cases."
    )
    if any(not np.isfinite(r["log-loss"]) for r in c_rows):
        print(
            "log-loss inf: a calibrator put probability exactly 0 or 1 on a case that went "
            "the other way (isotonic maps whole bins to 0 or 1); bayescal never clips silently."
        )

    with staged_output(out_dir, force=force) as tmp:
        # the plots' bands: their own stream of the --seed key, apart from the fits'
        k_plots = jax.random.fold_in(key, 2)
        if loo.get("warning"):  # the figure says it too, beside the curve it concerns
            flag = (f" [!] PSIS-LOO unreliable: Pareto k > {PARETO_K_THRESHOLD} "
                    f"for {loo['pareto_k_above_0.7']} cases")
            pits = {k + (flag if "LOO" in k else ""): u for k, u in pits.items()}
        plots = [out_dir / p.name for p in _write_plots(tmp, pits, probs, y_te, k_plots)]
        report = _report(rows, extras, c_rows, plots)
        with open(tmp / "report.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(report, indent=2))
    print("\nPlots: " + ", ".join(str(p) for p in plots))
    path = out_dir / "report.json"
    print(f"\nReport written to {path} ({time.perf_counter() - t0:.1f} s).")
    return report


def _json_safe(v):
    """``v`` with every non-finite float written as a string ("inf", "nan"): JSON has
    no such numbers."""
    if isinstance(v, dict):
        return {k: _json_safe(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json_safe(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return str(v)
    return v


def _report(rows, extras, c_rows, plots) -> dict:
    return _json_safe({
        "regression": {"dataset": "diabetes", "rows": rows, **extras},
        "classification": {"dataset": "breast_cancer", "ece_bins": 15, "rows": c_rows},
        "plots": [str(p) for p in plots],
    })
