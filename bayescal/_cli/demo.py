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
from bayescal._cli.output import check_target, staged_output
from bayescal._cli.report import format_table
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

    rows = []
    for name, u, q in [
        ("Poisson model", u_raw, q_raw),
        ("+ isotonic", u_iso, q_iso),
        ("+ isotonic, split-free (LOO)", u_iso_loo, q_iso_loo),
        ("+ sigma-scaling", u_sig, q_sig),
    ]:
        lo, hi = q[4], q[94]  # 5% and 95% levels: central 90% interval
        rows.append(
            {
                "method": name,
                "MACE (quantile)": float(reg.calibration_error(u)),
                "MACE (interval)": float(reg.calibration_error(u, kind="interval")),
                "area (quantile)": float(reg.miscalibration_area(u)),
                "area (interval)": float(reg.miscalibration_area(u, kind="interval")),
                "90% coverage": float(jnp.mean((y_test >= lo) & (y_test <= hi))),
                "90% width": float(jnp.mean(hi - lo)),
                "CRPS": float(2 * jnp.mean(reg.pinball_loss(y_test, q, levels))),
            }
        )
    k = np.asarray(loo.pareto_k)
    extras = {
        "sigma_scaling_factor": float(sig.factor),
        "loo": {
            "MACE (quantile), training data": float(reg.calibration_error(loo.pit)),
            "pareto_k_max": float(k.max()),
            "pareto_k_above_0.7": int((k > 0.7).sum()),
            "n_train": int(k.size),
        },
    }
    pits = {
        "Poisson model": u_raw,
        "+ isotonic": u_iso,
        "+ isotonic, split-free (LOO)": u_iso_loo,
        "+ sigma-scaling": u_sig,
    }
    return rows, extras, pits


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
    bins = 10
    rows, probs = [], {}
    for name, p in [
        ("logistic model", p_te),
        ("+ Platt", platt(p_te)),
        ("+ isotonic", iso(p_te)),
    ]:
        probs[name] = p
        dec = clf.brier_decomposition(y_te, p)
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
        plot.reliability_diagram(y_te, p, bins=10, ax=ax)
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
    header = list(rows[0])
    print(
        "\nRegression calibration on the test split (lower is better except coverage -> 0.90):"
    )
    print(format_table(header, [[r[h] for h in header] for r in rows]))
    loo = extras["loo"]
    print(
        "isotonic: fitted on the calibration split; split-free: fitted on the PSIS-LOO PIT "
        f"of the {loo['n_train']} training cases\n(no calibration data used; LOO-PIT "
        f"MACE on the training data {loo['MACE (quantile), training data']:.3f}, Pareto k "
        f"max {loo['pareto_k_max']:.2f}, {loo['pareto_k_above_0.7']} above 0.7).\n"
        f"sigma-scaling factor fitted on the calibration split: {extras['sigma_scaling_factor']:.3f}"
    )

    c_rows, probs, y_te = _classification_part(seed, num_samples, num_warmup, progress)
    c_header = list(c_rows[0])
    print("\nClassification calibration on the test split (lower is better except DSC):")
    print(format_table(c_header, [[r[h] for h in c_header] for r in c_rows]))
    if any(not np.isfinite(r["log-loss"]) for r in c_rows):
        print(
            "log-loss inf: a calibrator put probability exactly 0 or 1 on a case that went "
            "the other way (isotonic maps whole bins to 0 or 1); bayescal never clips silently."
        )

    with staged_output(out_dir, force=force) as tmp:
        # the plots' bands: their own stream of the --seed key, apart from the fits'
        k_plots = jax.random.fold_in(key, 2)
        plots = [out_dir / p.name for p in _write_plots(tmp, pits, probs, y_te, k_plots)]
        report = _report(rows, extras, c_rows, plots)
        with open(tmp / "report.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(report, indent=2))
    print("\nPlots: " + ", ".join(str(p) for p in plots))
    path = out_dir / "report.json"
    print(f"\nReport written to {path} ({time.perf_counter() - t0:.1f} s).")
    return report


def _report(rows, extras, c_rows, plots) -> dict:
    return {
        "regression": {"dataset": "diabetes", "rows": rows, **extras},
        "classification": {
            "dataset": "breast_cancer",
            "rows": [
                {
                    k: (v if not isinstance(v, float) or np.isfinite(v) else str(v))
                    for k, v in r.items()
                }
                for r in c_rows
            ],
        },
        "plots": [str(p) for p in plots],
    }
