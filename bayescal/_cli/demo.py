"""``bayescal demo``: the main job on bundled real data."""

from __future__ import annotations

import json
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from bayescal import regression as reg
from bayescal._cli.report import format_table
from bayescal.datasets import load_diabetes

LEVELS_90 = 0.9


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


def _mixture_cdf_grid(lam: jax.Array, grid: jax.Array) -> jax.Array:
    """``F_i(k) = mean_s P(Y <= k | lambda_si)`` for every k in ``grid``: [K, N]."""
    from jax.scipy.special import gammaincc

    return jax.lax.map(lambda k: jnp.mean(gammaincc(k + 1.0, lam), axis=0), grid)


def _mixture_pit(y: jax.Array, lam: jax.Array, key: jax.Array) -> jax.Array:
    """Randomized PIT from the exact posterior mixture of Poissons (Rao-Blackwellized)."""
    from jax.scipy.special import gammaincc

    upper = jnp.mean(gammaincc(y + 1.0, lam), axis=0)
    lower = jnp.mean(jnp.where(y > 0, gammaincc(y, lam), 0.0), axis=0)
    return lower + jax.random.uniform(key, y.shape, dtype=upper.dtype) * (upper - lower)


def _quantiles_from_cdf_grid(cdf: jax.Array, levels: jax.Array) -> jax.Array:
    """Quantiles ``min{k: F_i(k) >= level}`` from a CDF grid ``[K, N]``: [L, N]."""
    return jnp.sum(cdf[None, :, :] < levels[:, None, None], axis=1).astype(cdf.dtype)


def _regression_rows(y_cal, lam_cal, y_test, lam_test, key):
    """Metrics on the test split: raw model, isotonic recalibration, sigma-scaling."""
    levels = jnp.linspace(0.01, 0.99, 99)
    k_max = int(2 * max(float(y_test.max()), float(y_cal.max())))
    k_cal, k_test = jax.random.split(key)

    # Moments of the posterior predictive (law of total variance) for sigma-scaling.
    loc_c, sd_c = lam_cal.mean(0), jnp.sqrt(lam_cal.mean(0) + lam_cal.var(0))
    loc_t, sd_t = lam_test.mean(0), jnp.sqrt(lam_test.mean(0) + lam_test.var(0))

    iso = reg.fit_isotonic_recalibrator(_mixture_pit(y_cal, lam_cal, k_cal))
    sig = reg.fit_sigma_scaling(y_cal, loc_c, sd_c)

    u_raw = _mixture_pit(y_test, lam_test, k_test)
    cdf_test = _mixture_cdf_grid(lam_test, jnp.arange(k_max + 1, dtype=lam_test.dtype))
    q_raw = _quantiles_from_cdf_grid(cdf_test, levels)
    u_iso = iso(u_raw)
    q_iso = reg.recalibrated_quantiles(
        iso, levels, quantile_fn=lambda r: _quantiles_from_cdf_grid(cdf_test, r)
    )
    u_sig = reg.pit_normal(y_test, loc_t, sig(sd_t))
    q_sig = reg.recalibrated_quantiles(sig, levels, loc=loc_t, scale=sd_t)

    rows = []
    for name, u, q in [
        ("Poisson model", u_raw, q_raw),
        ("+ isotonic", u_iso, q_iso),
        ("+ sigma-scaling", u_sig, q_sig),
    ]:
        lo, hi = q[4], q[94]  # 5% and 95% levels: central 90% interval
        rows.append(
            {
                "method": name,
                "MACE (quantile)": float(reg.calibration_error(u)),
                "MACE (interval)": float(reg.calibration_error(u, kind="interval")),
                "area (exact)": float(reg.miscalibration_area(u)),
                "90% coverage": float(jnp.mean((y_test >= lo) & (y_test <= hi))),
                "90% width": float(jnp.mean(hi - lo)),
                "CRPS": float(2 * jnp.mean(reg.pinball_loss(y_test, q, levels))),
            }
        )
    extras = {"sigma_scaling_factor": float(sig.factor)}
    return rows, extras


def run_demo(
    *,
    out: str,
    seed: int = 0,
    num_samples: int = 1000,
    num_warmup: int = 500,
    progress: bool = True,
) -> dict:
    """Run the demo, print the report and write it (JSON) into ``out``."""
    from numpyro.infer import MCMC, NUTS

    t0 = time.perf_counter()
    out_dir = pathlib.Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
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
    mcmc.run(k_mcmc, jnp.asarray(X_tr), jnp.asarray(y_tr))
    samples = mcmc.get_samples()

    def rate(X):
        return jnp.exp(samples["alpha"][:, None] + samples["beta"] @ jnp.asarray(X).T)

    rows, extras = _regression_rows(
        jnp.asarray(data.y[ca]), rate(X_ca), jnp.asarray(data.y[te]), rate(X_te), k_test
    )
    header = list(rows[0])
    print(
        "\nRegression calibration on the test split (lower is better except coverage -> 0.90):"
    )
    print(format_table(header, [[r[h] for h in header] for r in rows]))
    print(
        f"sigma-scaling factor fitted on the calibration split: {extras['sigma_scaling_factor']:.3f}"
    )

    report = {"regression": {"dataset": "diabetes", "rows": rows, **extras}}
    path = out_dir / "report.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\nReport written to {path} ({time.perf_counter() - t0:.1f} s).")
    return report
