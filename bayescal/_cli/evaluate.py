"""``bayescal evaluate FILE``: metrics, a table, a JSON report and plots from a file.

Inputs:

- a NetCDF file written by ArviZ (``InferenceData.to_netcdf``; any PPL through ArviZ)
  or a zarr store (needs the optional ``zarr`` package), with ``posterior_predictive``
  and ``observed_data`` groups. The draws are read lazily and streamed in chunks over
  the observations (``--chunk-mb``), aligned with the observations by dim names;
- a CSV file in one of the layouts of :mod:`bayescal._cli.csv_layouts`.

Every value is checked after conversion to the compute dtype (float32 unless JAX's x64
mode is on), so a value that is finite in the file but overflows or underflows there is
reported, not computed with. Every problem with the input is reported as one line and
exit status 2; the output folder is written all at once or not at all.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
import stat
from typing import TYPE_CHECKING, Any

import numpy as np

from bayescal._cli import interrupt
from bayescal._cli.arrays import (
    DrawSource,
    file_signature,
    in_memory,
    open_lazy,
    unreadable,
)
from bayescal._cli.csv_layouts import InputError, read_csv
from bayescal._cli.options import shown
from bayescal._cli.output import check_target, staged_output
from bayescal._cli.paths import read_stream, stat_input
from bayescal._cli.report import Section, Table, format_sections, render_html
from bayescal._cli.sniff import NETCDF_MAGIC

if TYPE_CHECKING:
    from bayescal.core import CurveKind

__all__ = ["InputError", "load_task", "run_evaluate", "draw_statistics"]

_NETCDF_SUFFIXES = (".nc", ".netcdf", ".nc4", ".h5", ".hdf5")


def compute_dtype() -> np.dtype:
    """The dtype JAX computes in: float32 unless x64 is on."""
    import jax

    return np.dtype(np.float64 if jax.config.read("jax_enable_x64") else np.float32)


# --------------------------------------------------------------------------- reading
def load_task(
    path_str: str, *, fmt: str = "auto", var_name: str | None = None, layout: str | None = None
) -> dict[str, Any]:
    path = pathlib.Path(path_str)
    st = stat_input(path_str)  # refuses a device, a socket, a name too long
    data = None
    if stat.S_ISFIFO(st.st_mode):  # a FIFO or a pipe (<(cat d.csv)): read once, whole
        data = read_stream(path_str)
    if fmt == "auto":
        suffix = path.suffix.lower()
        if suffix == ".zarr":
            fmt = "zarr"
        elif suffix in _NETCDF_SUFFIXES or (data is not None and data.startswith(NETCDF_MAGIC)):
            fmt = "netcdf"
        else:
            fmt = "csv"
    if stat.S_ISDIR(st.st_mode) and fmt != "zarr":
        raise InputError(f"{shown(path)}: is a folder, not a file (a zarr store needs --format zarr)")
    if data is not None and fmt == "zarr":
        raise InputError(f"{shown(path)}: is a pipe or FIFO; a zarr store is a folder")
    if fmt in ("netcdf", "zarr"):
        if layout not in (None, "draws", "binary"):
            raise InputError(
                f"{shown(path)}: --layout {layout} does not apply to {fmt} files (they hold draws)"
            )
        src = open_lazy(path, fmt, var_name, data=data)
        return {"layout": "draws", "source": src.source, "y": src.y, "draws": src,
                "file_kind": fmt}
    if var_name is not None:
        raise InputError("--var-name applies to NetCDF and zarr files, not to CSV")
    before = file_signature(path_str) if data is None else None
    task = read_csv(path, layout, data=data)
    if before is not None and file_signature(path_str) != before:
        raise InputError(
            f"{shown(path)}: could not be read (the file changed while it was read); run again "
            "when it is complete"
        )
    if task["layout"] == "draws":
        task["draws"] = in_memory(task["y"], task["draws"], task["source"])
    return task


# ------------------------------------------------------------------------ validation
def as_compute(name: str, values: np.ndarray, dtype: np.dtype):
    """``values`` in ``dtype``, checked: finite in the file and finite after conversion."""
    values = np.asarray(values)
    if values.dtype == object or not (
        np.issubdtype(values.dtype, np.number) or values.dtype == bool
    ):
        raise InputError(f"'{name}' has dtype {values.dtype}; numbers are needed")
    if values.dtype.kind == "f" and values.dtype.itemsize >= np.dtype(dtype).itemsize:
        raw = values  # float32 or float64 as read: checked without a float64 copy
    else:
        raw = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(raw)
    if bad.any():
        n_nan = int(np.isnan(raw).sum())
        where = (
            f"first in data row {int(np.flatnonzero(bad)[0]) + 1}"
            if raw.ndim == 1
            else f"first at observation {int(np.flatnonzero(bad.any(0))[0])} of the chunk"
        )
        raise InputError(
            f"'{name}' has {n_nan} NaN or missing and {int(bad.sum()) - n_nan} infinite "
            f"values ({where}); drop or impute those rows first"
        )
    del bad
    if raw.dtype == dtype:
        return raw
    with np.errstate(over="ignore", under="ignore"):
        out = raw.astype(dtype)
    if not np.isfinite(out).all():
        big = float(np.abs(raw).max())
        raise InputError(
            f"'{name}' has values beyond the {dtype.name} range (max |value| {big:.3g} > "
            f"{float(np.finfo(dtype).max):.3g}); rescale the data (e.g. change units) or "
            "run with JAX_ENABLE_X64=1"
        )
    return out


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(message)


def _check_normal(y, loc, scale, dtype):
    if (scale <= 0).any():
        raise InputError(
            f"column 'scale' must be > 0 (found {int((scale <= 0).sum())} values <= 0, "
            f"min {float(scale.min()):.3g}); a predictive standard deviation is positive"
        )
    tiny = np.finfo(dtype).tiny
    s = scale.astype(dtype)
    small = s < tiny
    if small.any():
        raise InputError(
            f"column 'scale' has {int(small.sum())} values below the smallest normal "
            f"{dtype.name} ({float(tiny):.3g}), e.g. {float(scale[small][0]):.3g}: they "
            "would underflow to 0; rescale the data or run with JAX_ENABLE_X64=1"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        diff = y.astype(dtype) - loc.astype(dtype)
    _require(
        bool(np.isfinite(diff).all()),
        f"y - loc overflows {dtype.name} (|y - loc| > {float(np.finfo(dtype).max):.3g}); "
        "rescale the data or run with JAX_ENABLE_X64=1",
    )


# --------------------------------------------------------------------------- draws
def draw_statistics(
    src: DrawSource, dtype: np.dtype, *, chunk_bytes: int = 64 << 20
) -> dict[str, Any]:
    """One streamed pass over the draws: counts, flags and per-observation scores.

    Returns integer counts ``le = #{x <= y}`` and ``lt = #{x < y}`` per observation,
    whether all draws (and ``y``) are integers or 0/1, the mean of the draws, the CRPS
    of the empirical distribution and the variance of the draws per observation. Every
    chunk is converted to ``dtype`` and checked there, like the CSV columns.
    """
    y = src.y.astype(dtype)
    n, s = y.size, src.num_draws
    le = np.zeros(n, np.int64)
    lt = np.zeros(n, np.int64)
    mean = np.zeros(n, np.float64)
    crps = np.zeros(n, np.float64)
    var = np.zeros(n, np.float64)
    integer = bool(np.all(y == np.round(y)))
    binary = bool(np.isin(y, (0.0, 1.0)).all())
    w = (2.0 * np.arange(1, s + 1) - s - 1) / (s * s)  # pair term weights, order stats
    # float64 work in column blocks of about 8 MB, so the temporaries stay small
    width = max(1, (8 << 20) // (8 * s))
    for offset, block in src.chunks(chunk_bytes, dtype.itemsize):
        d = as_compute(src.name, block, dtype)
        del block
        for a in range(0, d.shape[1], width):
            sub = d[:, a : a + width]
            cols = slice(offset + a, offset + a + sub.shape[1])
            yc = y[cols]
            le[cols] = np.count_nonzero(sub <= yc, axis=0)
            lt[cols] = np.count_nonzero(sub < yc, axis=0)
            if integer:
                integer = bool(np.all(sub == np.round(sub)))
            if binary:
                binary = bool(np.all((sub == 0) | (sub == 1)))
            d64 = sub.astype(np.float64)
            m = d64.mean(0)
            mean[cols] = m
            var[cols] = np.mean((d64 - m) ** 2, axis=0)
            term1 = np.mean(np.abs(d64 - yc.astype(np.float64)), axis=0)
            d64.sort(axis=0)
            crps[cols] = term1 - w @ d64  # 0.5 * 2 / S^2 sum (2i - S - 1) x_(i)
        del d
    return {"le": le, "lt": lt, "integer": integer, "binary": binary, "mean": mean,
            "crps": crps, "var": var, "num_draws": s}


def pit_from_counts(le, lt, num_draws, dtype, key=None) -> np.ndarray:
    """PIT from counts, as ``bayescal.regression.pit_draws`` computes it."""
    import jax
    import jax.numpy as jnp

    le = jnp.asarray(le, jnp.int32)
    if key is None:
        return np.asarray(jax.jit(lambda c: (c / num_draws).astype(dtype))(le))
    lt = jnp.asarray(lt, jnp.int32)

    @jax.jit
    def randomized(le, lt, key):
        v = jax.random.uniform(key, le.shape, dtype=dtype)
        return ((lt + v * (le - lt)) / num_draws).astype(dtype)

    return np.asarray(randomized(le, lt, key))


# --------------------------------------------------------------------------- metrics
def _curve_metrics(pit, num_levels):
    from bayescal import regression as reg

    metrics, curves = {}, {}
    for kind in ("quantile", "interval"):
        metrics[kind] = {
            "MACE": float(reg.calibration_error(pit, kind=kind, num_levels=num_levels)),
            "RMSCE": float(
                reg.calibration_error(pit, kind=kind, norm="l2", num_levels=num_levels)
            ),
            "max gap": float(reg.calibration_error(pit, kind=kind, norm="max",
                                                   num_levels=num_levels)),
            "area (exact)": float(reg.miscalibration_area(pit, kind=kind)),
        }
        curves[kind] = reg.calibration_curve(pit, num_levels=num_levels, kind=kind)
    return metrics, curves


def _regression_report(task, dtype, num_levels, seed, chunk_bytes) -> dict[str, Any]:
    import jax

    from bayescal import regression as reg

    notes: list[str] = []
    layout = task["layout"]
    y = task["y"]
    loc_scale = None  # the predictive's location and scale, for --recalibrate
    if layout == "normal":
        loc = as_compute("loc", task["loc"], dtype)
        scale = as_compute("scale", task["scale"], dtype)
        _check_normal(y, task["loc"], task["scale"], dtype)
        pit = np.asarray(reg.pit_normal(y, loc, scale))
        scores = {
            "CRPS": float(reg.crps_normal(y, loc, scale)),
            "NLL": float(reg.nll_normal(y, loc, scale)),
            # regression.sharpness: the mean predictive variance (squared units of y),
            # squared here in float64 from its root so that float32 cannot overflow
            SHARPNESS: float(reg.sharpness(scale, root=True)) ** 2,
        }
        loc_scale = (loc, scale)
    elif layout == "quantiles":
        q = as_compute("quantiles", task["quantiles"], dtype)
        levels = task["levels"].astype(dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            ok = np.isfinite(np.diff(q, axis=0)).all() and np.isfinite(q - y).all()
        _require(ok, f"differences of the quantiles and y overflow {dtype.name}; rescale "
                     "the data or run with JAX_ENABLE_X64=1")
        bad = (np.diff(q, axis=0) < 0).any(0)
        if bad.any():
            raise InputError(
                f"the quantile columns decrease with the level in {int(bad.sum())} rows "
                f"(first in data row {int(np.flatnonzero(bad)[0]) + 1}); quantiles must "
                "be nondecreasing in the level"
            )
        pit = np.asarray(reg.pit_quantiles(y, q, levels))
        scores = {"pinball loss (mean over levels)": float(
            np.mean(np.asarray(reg.pinball_loss(y, q, levels), np.float64)))}
        notes.append(f"PIT interpolated between the quantiles at levels "
                     f"{', '.join(f'{v:g}' for v in task['levels'])}; clamped outside "
                     "(so the p-values are approximate)")
    else:
        stats = task["_stats"]
        key = None
        if stats["integer"]:
            key = jax.random.key(seed)
            notes.append("PIT randomized between F(y-) and F(y) (integer data)")
        pit = pit_from_counts(stats["le"], stats["lt"], stats["num_draws"], dtype, key)
        scores = {
            "CRPS": float(np.mean(stats["crps"])),
            # regression.sharpness(draws=...): the mean of the per-observation
            # variances of the draws (ddof=0), in squared units of y
            SHARPNESS: float(np.mean(stats["var"])),
        }
        loc_scale = (stats["mean"].astype(dtype), np.sqrt(stats["var"]).astype(dtype))
    metrics, curves = _curve_metrics(pit, num_levels)
    return {"metrics": metrics, "scores": scores, "notes": notes, "_pit": pit,
            "_curves": curves, "_y": y.astype(dtype), "_loc_scale": loc_scale}


def _classification_report(task, dtype, bins) -> dict[str, Any]:
    from bayescal import classification as clf

    y, p = task["y"], task["prob"]
    if ((p < 0) | (p > 1)).any():
        raise InputError(
            f"column 'prob' must lie in [0, 1] (min {p.min():.6g}, max {p.max():.6g}); "
            "pass probabilities, not logits or percentages"
        )
    if not np.isin(y, (0.0, 1.0)).all():
        raise InputError(
            f"with the binary layout 'y' must hold 0/1 labels (found "
            f"{', '.join(f'{v:g}' for v in np.unique(y)[:5])}"
            f"{', ...' if np.unique(y).size > 5 else ''})"
        )
    y = y.astype(np.int32)
    p = p.astype(dtype)
    metrics: dict[str, float | str] = {
        "ECE": float(clf.expected_calibration_error(y, p, bins=bins)),
        "ECE (debiased L2)": float(
            clf.expected_calibration_error(y, p, bins=bins, norm="l2", debias=True)
        ),
        "MCE": float(clf.expected_calibration_error(y, p, bins=bins, norm="max")),
        "Brier": float(clf.brier_score(y, p)),
    }
    dec = clf.brier_decomposition(y, p)
    metrics.update(
        {
            "CORP miscalibration": float(dec.miscalibration),
            "CORP discrimination": float(dec.discrimination),
            "CORP uncertainty": float(dec.uncertainty),
        }
    )
    with np.errstate(divide="ignore"):
        ll = float(clf.log_loss(y, p))
    metrics["log-loss"] = (
        ll if math.isfinite(ll) else "inf (a probability of exactly 0 or 1 was wrong)"
    )
    curve, edges = clf.reliability_curve(y, p, bins=bins, return_edges=True)
    curve = clf.acceptance_intervals(curve)
    return {"metrics": metrics, "scores": {}, "notes": [], "_curve": curve,
            "_edges": edges, "_y": y, "_prob": p}


def _all_finite(result: dict[str, Any], dtype: np.dtype) -> None:
    values = []
    for v in result["metrics"].values():
        values.extend(v.values() if isinstance(v, dict) else [v])
    values.extend(result["scores"].values())
    bad = [v for v in values if isinstance(v, float) and not math.isfinite(v)]
    if bad or ("_pit" in result and not np.isfinite(result["_pit"]).all()):
        raise InputError(
            f"the values are too large or too small for {dtype.name} arithmetic (a "
            "metric came out non-finite); rescale the data (e.g. standardize)"
            + (" or run with JAX_ENABLE_X64=1" if dtype != np.float64 else "")
        )


# -------------------------------------------------------------------------- LOO-PIT
# LOO-PIT holds the draws and the log-likelihood in memory (float64, as PSIS
# needs them): above this estimate it is skipped with a note, not attempted.
LOO_MAX_BYTES = 4 << 30


def _loo_report(src: DrawSource, dtype, num_levels, seed, integer) -> dict[str, Any]:
    """PSIS-LOO PIT of the file's observations (``bayescal.arviz.loo_pit``): metrics
    and Pareto k, or ``{"skipped": reason}``."""
    import warnings

    import jax

    from bayescal import arviz as baz

    need = 3 * 8 * src.num_draws * src.y.size
    if need > LOO_MAX_BYTES:
        return {"skipped": (
            f"LOO-PIT not computed: it would hold about {need / 2**30:.1f} GB in memory "
            f"(limit {LOO_MAX_BYTES >> 30} GB); call bayescal.arviz.loo_pit in Python, "
            "or thin the draws")}
    key = jax.random.key(seed) if integer else None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Pareto k values exceed.*",
                                    category=UserWarning)
            out = baz.loo_pit(src.tree, src.var_name, key=key, flat=True)
    except (ValueError, TypeError) as err:
        return {"skipped": f"LOO-PIT not computed: {err}"}
    except (OSError, RuntimeError) as err:
        # a corrupted chunk of log_likelihood or posterior (h5py: OSError; netCDF4,
        # numcodecs: RuntimeError); JAX's own runtime errors are not the file's
        if isinstance(err, jax.errors.JaxRuntimeError):
            raise
        raise unreadable(src.path, err) from None
    src.check_unchanged()  # the draws, log-likelihood and posterior were read whole
    pit = np.asarray(out.pit, dtype=np.float64)
    k = np.asarray(out.pareto_k, dtype=np.float64)
    if pit.shape != src.y.shape or not np.isfinite(pit).all():
        return {"skipped": "LOO-PIT not computed: non-finite values (check the "
                           "log_likelihood group)"}
    metrics, curves = _curve_metrics(pit.astype(dtype), num_levels)
    bad = int(np.sum(~(k <= baz.PARETO_K_THRESHOLD)))
    return {
        "metrics": metrics,
        "pareto_k": {"max": float(np.nanmax(k)) if np.isfinite(k).any() else float("nan"),
                     f"above {baz.PARETO_K_THRESHOLD}": bad, "n": int(k.size)},
        "randomized": integer,
        "_pit": pit,
        "_curves": curves,
    }


# ------------------------------------------------------------- coverage and tests
#: The central intervals whose coverage is reported.
COVERAGE_LEVELS = (0.5, 0.8, 0.9, 0.95)
#: A classifier's bin with fewer cases than this is flagged as sparse.
SPARSE_BIN = 10
#: Monte Carlo samples of every calibration test (p-values in steps of 1 / 1001).
NUM_TEST_SAMPLES = 1000
#: Up to this many observations one test simulates N uniform PIT values for all eight
#: regression metrics (cost ~ N); above, each metric's own test simulates counts on
#: the level grid (cost independent of N), and the area's p-value is the grid area's.
EXACT_AREA_TEST_MAX = 1_000
#: The classifier's consistency resampling draws N labels per simulation: above this
#: many draws in all it uses fewer simulations (at least MIN_TEST_SAMPLES).
CONSISTENCY_MAX_DRAWS = 50_000_000
MIN_TEST_SAMPLES = 100
_Z95 = 1.959963984540054  # the standard Normal's 0.975 quantile
_REG_METRICS = ("MACE", "RMSCE", "max gap", "area (exact)")
#: The report's name for :func:`bayescal.regression.sharpness` (its default, the mean
#: predictive variance; uncertainty-toolbox's ``sharpness`` is its square root).
SHARPNESS = "sharpness (mean variance)"


def wilson_interval(k: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion ``k / n`` (95% by default).

    The interval of ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``
    (Wilson, 1927, JASA 22), in closed form: no SciPy import on the command line.

    Examples
    --------
    >>> [round(v, 4) for v in wilson_interval(7, 10)]
    [0.3968, 0.8922]
    """
    if n <= 0:
        raise ValueError(f"n must be a positive count; got {n}")
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def coverage(pit: np.ndarray, levels=COVERAGE_LEVELS) -> list[dict[str, Any]]:
    """Coverage of the central intervals: the share of ``pit`` in ``[(1-c)/2, (1+c)/2]``.

    An observation lies in the predictive's central ``c`` interval exactly when its PIT
    lies in ``[(1 - c) / 2, (1 + c) / 2]`` (``|2u - 1| <= c``). Each entry holds the
    count, the coverage and its 95% Wilson interval, and whether the nominal ``c`` lies
    outside that interval ("low" / "high").
    """
    u = np.asarray(pit, np.float64)
    n = int(u.size)
    dist = np.abs(2.0 * u - 1.0)
    out = []
    for c in levels:
        k = int(np.count_nonzero(dist <= c))
        lo, hi = wilson_interval(k, n)
        flag = "low" if hi < c else "high" if lo > c else ""
        out.append({"nominal": c, "covered": k, "n": n, "coverage": k / n,
                    "wilson_95": [lo, hi], "flag": flag})
    return out


def _coverage_rows(cov: list[dict[str, Any]]) -> list[list[object]]:
    return [
        [f"{round(100 * c['nominal'])}%", f"{c['covered']}/{c['n']}", c["coverage"],
         f"[{c['wilson_95'][0]:.3f}, {c['wilson_95'][1]:.3f}]",
         {"low": "too few covered", "high": "too many covered", "": ""}[c["flag"]]]
        for c in cov
    ]


_COVERAGE_HEADER = ["central interval", "covered", "coverage", "95% Wilson interval",
                    "nominal outside"]


@functools.lru_cache(maxsize=16)
def _curve_statistics(num_levels: int):
    """``pit -> [8]``: every metric of the table, quantile then interval (one function
    object per ``num_levels``, so that its compiled test is reused)."""
    import jax.numpy as jnp

    from bayescal import regression as reg

    def statistics(u):
        out = []
        for kind in ("quantile", "interval"):
            out.extend(reg.calibration_error(u, kind=kind, norm=norm, num_levels=num_levels)
                       for norm in ("l1", "l2", "max"))
            out.append(reg.miscalibration_area(u, kind=kind))
        return jnp.stack(out)

    return statistics


def _regression_pvalues(pit, key, num_levels: int) -> tuple[dict, list[str]]:
    """Monte Carlo p-values of every curve metric under perfect calibration.

    Up to ``EXACT_AREA_TEST_MAX`` observations: one
    :func:`bayescal.regression.pit_null_test` of all eight metrics (each against the
    same ``NUM_TEST_SAMPLES`` uniform samples of ``n`` values: one program, kept in
    the persistent compilation cache). Above: the simulation of
    ``calibration_error_test`` and ``miscalibration_area_test(num_levels=...)``
    (multinomial counts on the level grid, whose cost does not grow with ``n``) run in
    NumPy: the library's tests draw those counts through a host callback, which JAX
    does not keep in its persistent cache, so each of their four programs would be
    compiled in every run (about 1 s each).
    """
    import jax

    from bayescal import regression as reg

    u = np.asarray(pit)
    out: dict[str, dict[str, float]] = {"quantile": {}, "interval": {}}
    if u.size <= EXACT_AREA_TEST_MAX:
        res = reg.pit_null_test(key, _curve_statistics(num_levels), u,
                                num_samples=NUM_TEST_SAMPLES)
        pv = np.asarray(res.pvalue, np.float64)
        for i, kind in enumerate(("quantile", "interval")):
            for j, name in enumerate(_REG_METRICS):
                out[kind][name] = float(pv[4 * i + j])
        return out, []
    notes = [f"above {EXACT_AREA_TEST_MAX} observations the p-values come from null "
             f"curves on the {num_levels}-level grid, and that of 'area (exact)' is the "
             "grid area's"]
    levels = np.linspace(0.0, 1.0, num_levels)
    observed = {}
    kinds: tuple[CurveKind, ...] = ("quantile", "interval")
    for kind in kinds:
        curve = reg.calibration_curve(u, num_levels=num_levels, kind=kind)
        obs = np.asarray(curve.observed, np.float64)
        observed[kind] = dict(zip(_REG_METRICS, curve_statistics(levels, obs[None]),
                                  strict=True))
    seed = np.asarray(jax.random.key_data(key)).astype(np.uint64).tolist()
    null = _grid_null(int(u.size), num_levels, NUM_TEST_SAMPLES, seed)
    for kind in kinds:
        for name, t in zip(_REG_METRICS, null, strict=True):
            t_obs = float(observed[kind][name][0])
            # ties count as exceedances (the statistics are discrete; float32 curves)
            exceed = int(np.count_nonzero(t >= t_obs - 1e-6 * max(t_obs, 1e-6)))
            out[kind][name] = (1 + exceed) / (1 + NUM_TEST_SAMPLES)
    return out, notes


def curve_statistics(levels: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, ...]:
    """MACE, RMSCE, max gap and area of curves ``observed`` [B, K] at ``levels`` [K].

    In NumPy, as :func:`bayescal.core.curve_error` (l1, l2, max with unit weights) and
    the area between the piecewise-linear curve and the diagonal (crossings exact, as
    :func:`bayescal.regression.miscalibration_area` with ``num_levels``) compute them.
    """
    d = observed - levels
    gap = np.abs(d)
    h = np.diff(levels)
    d0, d1 = d[:, :-1], d[:, 1:]
    a = np.abs(d0) + np.abs(d1)
    crossing = d0 * d1 < 0
    with np.errstate(invalid="ignore", divide="ignore"):
        seg = np.where(crossing, h * (d0**2 + d1**2) / (2 * np.where(a == 0, 1, a)),
                       h * a / 2)
    return (gap.mean(1), np.sqrt((gap**2).mean(1)), gap.max(1), seg.sum(1))


def _grid_null(n: int, num_levels: int, num_samples: int, seed) -> tuple[np.ndarray, ...]:
    """The four statistics of ``num_samples`` calibration curves of ``n`` uniform PIT
    values on the level grid, from multinomial cell counts (NumPy's generator seeded by
    ``seed``): the simulation of ``calibration_error_test`` for large ``n``, on the
    host. One null serves both kinds (``|2u - 1|`` is uniform when ``u`` is)."""
    levels = np.linspace(0.0, 1.0, num_levels)
    cells = np.diff(levels)
    counts = np.random.default_rng(seed).multinomial(n, cells / cells.sum(),
                                                     size=num_samples)
    curves = np.concatenate([np.zeros((num_samples, 1)), np.cumsum(counts, 1)], 1) / n
    return curve_statistics(levels, curves)


@functools.lru_cache(maxsize=16)
def _consistency_statistics(bins: int):
    """``(y, p) -> [ECE, debiased L2 ECE, MCE]``, for consistency resampling."""
    import jax.numpy as jnp

    from bayescal import classification as clf

    def stats(y, p):
        return jnp.stack([
            clf.expected_calibration_error(y, p, bins=bins),
            clf.expected_calibration_error(y, p, bins=bins, norm="l2", debias=True),
            clf.expected_calibration_error(y, p, bins=bins, norm="max"),
        ])

    return stats


@functools.lru_cache(maxsize=16)
def _consistency_kernel(bins: int, num_samples: int, batch: int):
    import jax
    import jax.numpy as jnp

    stats = _consistency_statistics(bins)

    @jax.jit
    def kernel(key, y, p):
        observed = stats(y, p)

        def one(k):
            return stats(jax.random.bernoulli(k, p).astype(y.dtype), p)

        sims = jax.lax.map(one, jax.random.split(key, num_samples), batch_size=batch)
        exceed = jnp.sum(sims >= observed[None, :], axis=0)
        return (1 + exceed) / (1 + num_samples)

    return kernel


def consistency_samples(n: int) -> int:
    """Simulations of the classifier's consistency resampling for ``n`` observations:
    ``NUM_TEST_SAMPLES``, fewer when that would draw more than ``CONSISTENCY_MAX_DRAWS``
    labels (at least ``MIN_TEST_SAMPLES``)."""
    return int(max(MIN_TEST_SAMPLES, min(NUM_TEST_SAMPLES, CONSISTENCY_MAX_DRAWS // max(1, n))))


def classification_pvalues(y, p, key, bins: int) -> dict[str, float | None]:
    """P-values of the classifier's metrics under perfect calibration.

    ECE, debiased ECE and MCE: consistency resampling (Bröcker & Smith, 2007): labels
    drawn as ``Bernoulli(p)`` ``B`` times, the metric recomputed,
    :math:`p = (1 + \\#\\{T_b \\ge T_{obs}\\}) / (1 + B)` (Davison & Hinkley, 1997, eq.
    4.11, as :func:`bayescal.core.null_pvalue`). Brier score: Spiegelhalter's (1986)
    z-test, two-sided, :math:`z = \\sum (y - p)(1 - 2p) / \\sqrt{\\sum (1 - 2p)^2 p(1 -
    p)}`. The other metrics are not calibration statistics (None). ``B`` is
    :func:`consistency_samples`.
    """
    y = np.asarray(y, np.int32)
    n = y.size
    num_samples = consistency_samples(n)
    batch = int(max(1, min(num_samples, (1 << 22) // max(1, n))))
    kernel = _consistency_kernel(bins, num_samples, batch)
    pv = np.asarray(kernel(key, y, np.asarray(p)), np.float64)
    out: dict[str, float | None] = {"ECE": float(pv[0]), "ECE (debiased L2)": float(pv[1]),
                                    "MCE": float(pv[2])}
    out["Brier"] = spiegelhalter_pvalue(y, p)
    return out


def spiegelhalter_pvalue(y, p) -> float | None:
    """Two-sided p-value of Spiegelhalter's (1986) z-test of calibration (Brier score).

    None when every probability is 0, 1/2 or 1 (the variance is 0).
    """
    y = np.asarray(y, np.float64)
    p = np.asarray(p, np.float64)
    var = float(np.sum((1 - 2 * p) ** 2 * p * (1 - p)))
    if not var > 0:
        return None
    z = float(np.sum((y - p) * (1 - 2 * p))) / math.sqrt(var)
    return math.erfc(abs(z) / math.sqrt(2))


def bin_table(curve, edges) -> list[dict[str, Any]]:
    """The classifier's bins: range, count, mean prediction, frequency, acceptance
    interval, and flags (fewer than ``SPARSE_BIN`` cases; outside the interval)."""
    w = np.asarray(curve.weight)
    rows = []
    for i in range(w.size):
        if w[i] == 0:
            continue
        e, o = float(curve.expected[i]), float(curve.observed[i])
        lo, hi = float(curve.lower[i]), float(curve.upper[i])
        rows.append({
            "bin": [float(edges[i]), float(edges[i + 1])],
            "closed_right": i == w.size - 1,  # [a, b) but the last, [a, b]
            "n": int(w[i]),
            "mean prob": e, "frequency": o, "acceptance_95": [lo, hi],
            "sparse": bool(w[i] < SPARSE_BIN), "outside": bool(o < lo or o > hi),
        })
    return rows


def bin_text(row: dict[str, Any]) -> str:
    """A bin of :func:`bin_table` as printed: half-open ``[a, b)``, the last one closed
    ``[a, b]``, as the binning assigns a value on an edge to the bin above it.

    Examples
    --------
    >>> bin_text({"bin": [0.2, 0.3], "closed_right": False})
    '[0.20, 0.30)'
    """
    lo, hi = row["bin"]
    return f"[{lo:.2f}, {hi:.2f}{']' if row['closed_right'] else ')'}"


def _bin_caveats(rows: list[dict[str, Any]], mce: float) -> list[str]:
    caveats = []
    sparse = [r for r in rows if r["sparse"]]
    if sparse:
        caveats.append(
            f"caveat: {len(sparse)} of {len(rows)} non-empty bins have fewer than "
            f"{SPARSE_BIN} cases (marked 'sparse'); their frequencies are noisy and can "
            "dominate MCE and the reliability diagram")
    if rows:
        worst = max(rows, key=lambda r: abs(r["frequency"] - r["mean prob"]))
        if worst["sparse"]:
            caveats.append(
                f"caveat: MCE {mce:.3f} comes from the bin {bin_text(worst)} with {worst['n']} "
                f"case{'s' if worst['n'] != 1 else ''}: read it with its acceptance "
                "interval and p-value, or use fewer --bins")
    return caveats


# -------------------------------------------------------------------- data split
def data_split(task: dict[str, Any], requested: str) -> dict[str, str]:
    """Whether FILE's observations were used to fit the model, and why we say so.

    ``requested``: "auto", "in-sample" or "held-out" (``--data-split``). In an ArviZ
    file ``observed_data`` is the data the model was conditioned on, so its posterior
    predictive PIT is in-sample; a CSV file does not say.
    """
    if requested != "auto":
        return {"split": requested, "reason": "stated with --data-split"}
    if task.get("file_kind") in ("netcdf", "zarr"):
        return {"split": "in-sample", "reason": (
            "ArviZ's observed_data holds the observations the model was fitted to, so "
            "this PIT is in-sample (optimistic: the model saw them); the leave-one-out "
            "PIT from a log_likelihood group is the out-of-sample check (pass "
            "--data-split held-out if these are new observations)")}
    return {"split": "not stated", "reason": (
        "the file does not say whether its rows were used to fit the model; pass "
        "--data-split in-sample or --data-split held-out")}


def _pit_label(split: str, kind: str) -> str:
    what = "PIT" if kind == "regression" else "predictions"
    if split == "not stated":
        return f"{what} (split not stated)"
    return f"{split} {what}"


LOO_LABEL = "LOO-PIT (PSIS leave-one-out, out-of-sample)"


# ---------------------------------------------------------------- recalibration
#: --recalibrate's choices: auto (cross-validated choice, "none" included) and the
#: methods of each kind.
REGRESSION_RECALIBRATORS = ("auto", "isotonic", "sigma", "conformal")
CLASSIFIER_RECALIBRATORS = ("auto", "isotonic", "platt", "beta", "histogram", "temperature")
RECALIBRATORS = tuple(dict.fromkeys(REGRESSION_RECALIBRATORS + CLASSIFIER_RECALIBRATORS))
_CV_FOLDS = 5


def _verdict(names: tuple, fold_scores: np.ndarray, method: str, score: str) -> dict:
    """Whether ``method`` beat no recalibration in cross-validation on the calibration
    part: its paired difference to "none" over the folds, with Student's t 95%
    interval (the rule of select_calibrator), in words."""
    from bayescal.core import paired_interval

    scores = np.asarray(fold_scores, np.float64)
    k = scores.shape[1]
    diff, half = paired_interval(scores[names.index(method)] - scores[names.index("none")])
    if math.isfinite(diff) and math.isfinite(half) and diff + half < 0:
        helped, words = "yes", "helped"
    elif math.isfinite(diff) and math.isfinite(half) and diff - half > 0:
        helped, words = "no", "made it worse"
    elif diff == -math.inf:
        helped, words = "yes", "helped (the raw predictions scored inf)"
    elif diff == math.inf:
        helped, words = "no", "made it worse (it scored inf)"
    else:
        helped, words = "unclear", "made no difference beyond the noise"
    text = (f"verdict: {method} {words}: {score} {diff:+.4g} +- {half:.2g} (95%) against "
            f"no recalibration, {k}-fold cross-validation within the calibration part")
    return {"method": method, "helped": helped, "score": score, "difference": diff,
            "difference_95": half, "folds": k, "text": text}


def _choose(names: tuple, fold_scores: np.ndarray) -> str:
    """The candidate with the lowest mean, unless its 95% interval against "none"
    reaches 0 (select_calibrator's default rule)."""
    means = np.nanmean(np.where(np.isnan(fold_scores), np.inf, fold_scores), axis=1)
    best = names[int(np.argmin(means))]
    if best == "none":
        return best
    return best if _verdict(names, fold_scores, best, "")["helped"] == "yes" else "none"


def _split_indices(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    n_cal = int(round(fraction * n))
    if n_cal < 2 or n - n_cal < 2:
        raise InputError(
            f"--calibration-fraction {fraction:g} of {n} observations leaves {n_cal} for "
            f"calibration and {n - n_cal} held out; each part needs at least 2 (choose "
            "a fraction nearer 0.5, or more data)")
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[:n_cal]), np.sort(perm[n_cal:])


def _pit_summary(u, num_levels) -> dict[str, Any]:
    from bayescal import regression as reg

    return {
        "quantile MACE": float(reg.calibration_error(u, num_levels=num_levels)),
        "interval MACE": float(reg.calibration_error(u, kind="interval",
                                                     num_levels=num_levels)),
        "area (exact)": float(reg.miscalibration_area(u)),
        "coverage": coverage(u),
    }


def _cov_cell(c: dict[str, Any]) -> str:
    lo, hi = c["wilson_95"]
    return f"{c['coverage']:.3f} [{lo:.3f}, {hi:.3f}]"


def _recalibrate(method: str, kind: str, layout: str, result: dict[str, Any],
                loo_result: dict[str, Any] | None, *, fraction: float, seed: int,
                num_levels: int, bins: int, dtype) -> dict[str, Any]:
    """Fit ``method`` on a seeded calibration part; metrics of the rest before/after.

    Returns the JSON entry, with ``_calibrators`` (file name -> fitted object),
    ``_table`` and, for the plots, ``_before`` / ``_after`` (held-out PIT or
    probabilities).
    """
    y = result["_y"]
    n = int(y.size)
    cal, test = _split_indices(n, fraction, seed)
    entry: dict[str, Any] = {
        "method": method, "calibration_fraction": fraction, "seed": seed,
        "n_calibration": int(cal.size), "n_held_out": int(test.size),
    }
    if kind == "classification":
        return _recalibrate_classifier(method, result, cal, test, entry, bins, seed)
    if method not in REGRESSION_RECALIBRATORS:
        raise InputError(
            f"--recalibrate {method} applies to binary classifiers; a regression is "
            f"recalibrated with --recalibrate {', '.join(REGRESSION_RECALIBRATORS)}")
    use_loo = loo_result is not None
    pit = np.asarray(loo_result["_pit"] if use_loo else result["_pit"]).astype(dtype)
    entry["pit"] = LOO_LABEL if use_loo else "PIT of the file's predictive"
    if method == "conformal":
        return _recalibrate_conformal(layout, result, pit, cal, test, entry)
    if method == "sigma" and layout != "normal":
        raise InputError(
            "--recalibrate sigma rescales a Normal predictive's scale: it needs the "
            f"normal layout (y,loc,scale), not {layout}; use --recalibrate isotonic "
            "or conformal")
    fits = _regression_fits(layout, result, pit)
    names = ("none", *(fits if method == "auto" else (method,)))
    fold_scores = _regression_cv(names, fits, pit, cal, seed, num_levels)
    chosen = _choose(names, fold_scores) if method == "auto" else method
    if chosen != "none":
        entry["verdict"] = _verdict(names, fold_scores, chosen, "quantile MACE")
    else:
        entry["verdict"] = {"method": "none", "helped": "no", "text": (
            "verdict: no recalibration: no candidate (" + ", ".join(names[1:]) + ") "
            "lowered the cross-validated quantile MACE beyond the noise (95% t interval "
            "of the paired difference); no recalibrator written")}
    entry["chosen"] = chosen
    calibrators: dict[str, Any] = {}
    before = pit[test]
    if chosen == "none":
        after = before
        entry["fitted"] = "none (auto chose no recalibration)"
    else:
        r, entry["fitted"] = fits[chosen](cal)
        after = np.asarray(fits[chosen](cal, r, test))
        calibrators["recalibrator.npz"] = r
        if chosen == "sigma":
            entry["factor"] = float(r.factor)
    entry["before"] = _pit_summary(before, num_levels)
    entry["after"] = _pit_summary(after, num_levels)
    rows = [[m, entry["before"][m], entry["after"][m]]
            for m in ("quantile MACE", "interval MACE", "area (exact)")]
    for cb, ca in zip(entry["before"]["coverage"], entry["after"]["coverage"], strict=True):
        rows.append([f"coverage {round(100 * cb['nominal'])}%", _cov_cell(cb),
                     _cov_cell(ca)])
    entry.update(_calibrators=calibrators, _before=before, _after=after,
                 _table=Table(["held-out metric", "before", "after"], rows))
    return entry


def _regression_fits(layout: str, result: dict[str, Any], pit: np.ndarray) -> dict:
    """name -> ``fit(rows)`` giving ``(recalibrator, description)`` and
    ``fit(rows, recalibrator, rows_out)`` giving the recalibrated PIT of ``rows_out``."""
    from bayescal import regression as reg

    y = result["_y"]

    def isotonic(rows, r=None, out=None):
        if r is None:
            return reg.fit_isotonic_recalibrator(pit[rows]), (
                "isotonic recalibrator (Kuleshov et al., 2018) fitted on the calibration "
                "part's PIT")
        return np.asarray(r(pit[out]))

    fits = {"isotonic": isotonic}
    if layout == "normal":
        loc, scale = result["_loc_scale"]

        def sigma(rows, r=None, out=None):
            if r is None:
                r = reg.fit_sigma_scaling(y[rows], loc[rows], scale[rows])
                return r, (f"sigma scaling (Laves et al., 2020): scale x "
                           f"{float(r.factor):.4g}, fitted on the calibration part")
            return np.asarray(r.pit(y[out], loc[out], scale[out]))

        fits["sigma"] = sigma
    return fits


def _regression_cv(names, fits, pit, cal, seed, num_levels) -> np.ndarray:
    """Quantile MACE of each candidate on the held-out folds of the calibration part
    (each fitted on the other folds; "none": the raw PIT)."""
    from bayescal import regression as reg

    fold = np.random.default_rng([seed, 1]).permutation(cal.size) % _CV_FOLDS
    scores = np.full((len(names), _CV_FOLDS), np.nan)
    for k in range(_CV_FOLDS):
        train, held = cal[fold != k], cal[fold == k]
        for i, name in enumerate(names):
            try:
                if name == "none":
                    u = pit[held]
                else:
                    r, _ = fits[name](train)
                    u = fits[name](train, r, held)
                scores[i, k] = float(reg.calibration_error(u, num_levels=num_levels))
            except ValueError:  # a fold too small or degenerate for this fit: no score
                pass
    return scores


def _recalibrate_conformal(layout, result, pit, cal, test, entry):
    from bayescal import regression as reg

    if result.get("_loc_scale") is None:
        raise InputError(
            f"--recalibrate conformal needs a predictive location and scale (normal or "
            f"draws layout), not {layout}; use --recalibrate isotonic")
    y = result["_y"]
    loc, scale = result["_loc_scale"]
    positive = bool(np.all(scale > 0))
    s_cal, s_test = (scale[cal], scale[test]) if positive else (None, None)
    entry["fitted"] = (
        "split-conformal intervals (Lei et al., 2018) on the calibration part's "
        + ("scale-normalized residuals |y - loc| / scale" if positive
           else "absolute residuals |y - loc|")
        + (" (loc, scale: the mean and sd of the draws)" if layout == "draws" else ""))
    calibrators: dict[str, Any] = {}
    before = coverage(pit[test])
    after, widths = [], []
    for c in COVERAGE_LEVELS:
        alpha = round(1 - c, 10)
        try:
            r = reg.fit_conformal(y[cal], loc[cal], s_cal, alpha=alpha)
        except ValueError as err:
            raise InputError(
                f"--recalibrate conformal at {round(100 * c)}%: {err} (raise "
                "--calibration-fraction)") from None
        lo, hi = (np.asarray(v, np.float64) for v in
                  (r(loc[test], s_test) if positive else r(loc[test])))
        k = int(np.count_nonzero((lo <= y[test]) & (y[test] <= hi)))
        n = int(test.size)
        ci = wilson_interval(k, n)
        after.append({"nominal": c, "covered": k, "n": n, "coverage": k / n,
                      "wilson_95": list(ci),
                      "flag": "low" if ci[1] < c else "high" if ci[0] > c else ""})
        widths.append(float(np.mean(hi - lo)))
        calibrators[f"recalibrator_{round(100 * c)}.npz"] = r
    entry["before"] = {"coverage": before}
    entry["after"] = {"coverage": after, "mean width": widths}
    rows = [[f"coverage {round(100 * b['nominal'])}%", _cov_cell(b), _cov_cell(a), w]
            for b, a, w in zip(before, after, widths, strict=True)]
    entry.update(_calibrators=calibrators, _before=None, _after=None,
                 _table=Table(["held-out metric", "before", "after",
                               "mean width after"], rows))
    return entry


#: What each classifier method fits, in words (for the report).
_CLASSIFIER_FITTED = {
    "isotonic": "isotonic regression (Zadrozny & Elkan, 2002) of the labels on the "
                "probabilities",
    "platt": "Platt scaling (Platt, 1999) of the probabilities' log-odds",
    "platt_score": "Platt scaling of the probabilities as scores (scikit-learn's "
                   "sigmoid calibration; the log-odds of exact 0 and 1 are infinite)",
    "beta": "beta calibration (Kull et al., 2017)",
    "histogram": "histogram binning (Zadrozny & Elkan, 2001)",
    "temperature": "temperature scaling (Guo et al., 2017) of the probabilities' "
                   "log-odds (exact 0 and 1 are kept)",
}


def _recalibrate_classifier(method, result, cal, test, entry, bins, seed):
    from bayescal import classification as clf

    if method not in CLASSIFIER_RECALIBRATORS:
        raise InputError(
            f"--recalibrate {method} applies to regression; a binary classifier is "
            f"recalibrated with --recalibrate {', '.join(CLASSIFIER_RECALIBRATORS)}")
    y, p = result["_y"], result["_prob"]
    # the verdict: cross-validation within the calibration part (select_calibrator's
    # folds and default rule), log loss; the held-out part is kept for the report
    asked = {} if method == "auto" else {"candidates": ("none", method)}
    try:
        with np.errstate(all="ignore"):
            sel = clf.select_calibrator(y[cal], p[cal], key=seed, **asked)
    except ValueError as err:
        first = (str(err).strip().splitlines() or ["invalid input"])[0]
        raise InputError(f"--recalibrate {method} on the calibration part: {first}") from None
    chosen = sel.winner if method == "auto" else method
    if chosen == "none":
        entry["verdict"] = {"method": "none", "helped": "no", "text": (
            "verdict: no recalibration: no candidate (" + ", ".join(sel.names[1:]) + ") "
            "lowered the cross-validated log loss beyond the noise (95% t interval of "
            "the paired difference); no recalibrator written")}
    else:
        entry["verdict"] = _verdict(sel.names, sel.fold_scores, chosen, "log loss")
    entry["chosen"] = chosen
    before = p[test]
    calibrators: dict[str, Any] = {}
    if chosen == "none":
        after = before
        entry["fitted"] = "none (auto chose no recalibration)"
    else:
        from bayescal.classification._select import CANDIDATES

        fit = {
            "isotonic": clf.fit_isotonic, "platt": clf.fit_platt, "beta": clf.fit_beta,
            "histogram": clf.fit_histogram_binning,
            "platt_score": functools.partial(clf.fit_platt, input="score"),
            # select_calibrator's candidate: a PlattCalibrator (A = -1/T, B = 0) that
            # takes the probabilities, as the other files do
            "temperature": lambda y, p: CANDIDATES["temperature"].fit(y, p, np.ones_like(p)),
        }[chosen]
        r = fit(y[cal], p[cal])
        after = np.asarray(r(p[test])).astype(p.dtype)
        calibrators["recalibrator.npz"] = r
        entry["fitted"] = f"{_CLASSIFIER_FITTED[chosen]}, fitted on the calibration part"

    def summary(q):
        with np.errstate(divide="ignore"):
            ll = float(clf.log_loss(y[test], q))
        return {
            "ECE": float(clf.expected_calibration_error(y[test], q, bins=bins)),
            "MCE": float(clf.expected_calibration_error(y[test], q, bins=bins,
                                                        norm="max")),
            "Brier": float(clf.brier_score(y[test], q)),
            "log-loss": ll if math.isfinite(ll) else "inf (a probability of 0 or 1 was wrong)",
        }

    entry["before"], entry["after"] = summary(before), summary(after)
    rows = [[m, entry["before"][m], entry["after"][m]] for m in entry["before"]]
    caveats = []
    for what, q in (("before", before), ("after", after)):
        w = np.asarray(clf.reliability_curve(y[test], q, bins=bins).weight)
        sparse = int(np.count_nonzero((w > 0) & (w < SPARSE_BIN)))
        if sparse:
            caveats.append(
                f"caveat: {what} recalibration, {sparse} of {int(np.count_nonzero(w))} "
                f"non-empty held-out bins have fewer than {SPARSE_BIN} cases: MCE can "
                "be dominated by them")
    entry["caveats"] = caveats
    entry.update(_calibrators=calibrators, _before=before, _after=after,
                 _y_held_out=y[test],
                 _table=Table(["held-out metric", "before", "after"], rows))
    return entry


# ------------------------------------------------------------------------------ run
#: Every file a report may write into --out: --force replaces these and nothing else.
REPORT_FILES = (
    "report.json",
    "report.html",
    "calibration_quantile.png",
    "calibration_interval.png",
    "pit_ecdf.png",
    "reliability.png",
    "loo_pit_ecdf.png",
    "recalibration.png",
    "recalibrator.npz",
    *(f"recalibrator_{round(100 * c)}.npz" for c in COVERAGE_LEVELS),
)


#: The calibrator files among them: --force replaces one only if bayescal wrote it there
#: and it is unchanged since (report.json's "calibrator_files" records the SHA-256 of
#: each, carried over by later reports while the file stays as written), so that a
#: user's own recalibrator.npz in --out is never lost.
CALIBRATOR_FILES = tuple(name for name in REPORT_FILES if name.endswith(".npz"))


def _sha256(path: pathlib.Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _own_calibrators(out: pathlib.Path, writes: tuple[str, ...]) -> dict[str, str]:
    """The calibrator files in ``out`` that bayescal wrote and nobody changed since
    (name: SHA-256); refuses, before any work, to replace any other one in ``writes``."""
    try:
        with open(out / "report.json", encoding="utf-8") as fh:
            recorded = json.load(fh).get("calibrator_files", {})
    except (OSError, ValueError, AttributeError):
        recorded = {}
    own = {
        name: digest
        for name, digest in (recorded.items() if isinstance(recorded, dict) else ())
        if name in CALIBRATOR_FILES
        and (out / name).is_file()
        and digest == _sha256(out / name)
    }
    foreign = [name for name in writes if (out / name).exists() and name not in own]
    if foreign:
        raise InputError(
            f"--out {shown(out)}: {', '.join(foreign)} there was not written by bayescal, or "
            "was changed since (its report.json does not record it); --force replaces "
            "only report files: move it away or choose another --out; nothing was "
            "written"
        )
    return own


def run_evaluate(
    file: str,
    *,
    out: str,
    fmt: str = "auto",
    var_name: str | None = None,
    layout: str | None = None,
    num_levels: int = 100,
    bins: int = 15,
    seed: int = 0,
    plots: bool = True,
    force: bool = False,
    chunk_mb: int = 64,
    loo: bool = True,
    split: str = "auto",
    recalibrate: str | None = None,
    calibration_fraction: float = 0.5,
) -> dict[str, Any]:
    import jax

    out_dir = pathlib.Path(out)
    stat_input(file)  # a name too long, a device: refused first (nothing read)
    check_target(out_dir, force=force, names=REPORT_FILES, inputs=[file])  # before any work
    writes = (() if recalibrate is None
              else tuple(n for n in CALIBRATOR_FILES if n != "recalibrator.npz")
              if recalibrate == "conformal" else ("recalibrator.npz",))
    own = _own_calibrators(out_dir, writes) if out_dir.is_dir() else {}
    if recalibrate is not None and recalibrate not in RECALIBRATORS:
        raise InputError(f"--recalibrate must be one of {', '.join(RECALIBRATORS)}")
    if not 0 < calibration_fraction < 1:
        raise InputError("--calibration-fraction must be in (0, 1)")
    dtype = compute_dtype()
    task = load_task(file, fmt=fmt, var_name=var_name, layout=layout)
    # independent streams from --seed: 0 randomized PIT, 1 tests, 2 bands
    test_key = jax.random.fold_in(jax.random.key(seed), 1)
    band_key = jax.random.fold_in(jax.random.key(seed), 2)
    try:
        task["y"] = as_compute("y", task["y"], dtype)
        n = task["y"].size
        if n < 2:
            raise InputError(f"{shown(file)}: only {n} observation; at least 2 are needed")
        if isinstance(task.get("draws"), DrawSource):
            src = task["draws"]
            stats = draw_statistics(src, dtype, chunk_bytes=chunk_mb << 20)
            task["_stats"] = stats
            if stats["binary"] and layout != "draws":
                task["layout"] = "binary"
                task["prob"] = stats["mean"]
                task["source"] = task["source"].replace("draws)", "Bernoulli draws)")
        if task["layout"] == "binary":
            prob = task["prob"]
            task["prob"] = as_compute("prob", prob, np.dtype(np.float64))
            result = _classification_report(task, dtype, bins)
            kind = "classification"
        else:
            result = _regression_report(task, dtype, num_levels, seed, chunk_mb << 20)
            kind = "regression"
        _all_finite(result, dtype)
        if recalibrate in ("sigma", "conformal") and kind == "classification":
            raise InputError(
                f"--recalibrate {recalibrate} applies to regression; a binary classifier "
                "is recalibrated with --recalibrate isotonic")
        src = task.get("draws")
        loo_result = None
        if (loo and kind == "regression" and isinstance(src, DrawSource)
                and src.has_log_likelihood):
            loo_result = _loo_report(src, dtype, num_levels, seed,
                                     bool(task["_stats"]["integer"]))
            if "skipped" in loo_result:
                result["notes"].append(loo_result["skipped"])
                loo_result = None
        if kind == "regression":
            result["pvalues"], more = _regression_pvalues(result["_pit"], test_key,
                                                          num_levels)
            result["notes"].extend(more)
            result["coverage"] = coverage(result["_pit"])
            if loo_result is not None:
                loo_result["pvalues"], _ = _regression_pvalues(
                    loo_result["_pit"], jax.random.fold_in(test_key, 100), num_levels)
                loo_result["coverage"] = coverage(loo_result["_pit"])
        else:
            result["pvalues"] = classification_pvalues(result["_y"], result["_prob"],
                                                       test_key, bins)
            result["bins"] = bin_table(result["_curve"], result["_edges"])
        recal = None
        if recalibrate is not None:
            recal = _recalibrate(
                recalibrate, kind, task["layout"], result, loo_result,
                fraction=calibration_fraction, seed=seed, num_levels=num_levels,
                bins=bins, dtype=dtype)
    except InputError as err:
        where = shown(file)
        raise InputError(f"{where}: {err}" if not str(err).startswith(where) else
                         str(err)) from None
    finally:
        if isinstance(task.get("draws"), DrawSource):
            task["draws"].close()
    result["notes"] = task.get("notes", []) + result["notes"]
    interrupt.check()  # a Ctrl-C swallowed on the way (see interrupt): no table

    split_info = data_split(task, split)
    label = _pit_label(split_info["split"], kind)
    caveats = _caveats(kind, result, n)
    if loo_result is not None:
        pk = loo_result["pareto_k"]
        if pk["above 0.7"]:
            result["notes"].append(
                f"{pk['above 0.7']} observations have Pareto k > 0.7: their LOO-PIT values "
                "are unreliable")
    sections = _sections(kind, result, loo_result, recal, label, split_info, caveats)
    head = f"{file}: {kind}, {n} observations, from {task['source']}"
    print(f"{shown(file)}: {kind}, {n} observations, from {shown(task['source'])}")
    print(f"data: {label}: {split_info['reason']}")
    print()
    print(format_sections(sections))

    report = {
        "file": str(file),
        "task": kind,
        "layout": task["layout"],
        "source": task["source"],
        "n": int(n),
        "dtype": dtype.name,
        "data": {**split_info, "label": label},
        "metrics": result["metrics"],
        "pvalues": result["pvalues"],
        "scores": result["scores"],
        "notes": result["notes"],
        "caveats": caveats,
        "plots": [],
        "tests": {
            "num_samples": (NUM_TEST_SAMPLES if kind == "regression"
                            else consistency_samples(int(n))),
            "seed": seed,
            "method": ((f"bayescal.regression.pit_null_test of the eight metrics "
                        f"(N <= {EXACT_AREA_TEST_MAX})" if n <= EXACT_AREA_TEST_MAX else
                        "the null of bayescal.regression.calibration_error_test and "
                        "miscalibration_area_test on the level grid (multinomial counts), "
                        "simulated in NumPy")
                       if kind == "regression" else
                       "ECE, MCE: consistency resampling (Bernoulli(p) labels); Brier: "
                       "Spiegelhalter's z-test"),
        },
    }
    if kind == "regression":
        report["coverage"] = result["coverage"]
    else:
        report["bins"] = result["bins"]
    if loo_result is not None:
        report["loo"] = {k: loo_result[k] for k in ("metrics", "pareto_k", "randomized",
                                                     "pvalues", "coverage")}
        report["loo"]["label"] = LOO_LABEL
    if recal is not None:
        report["recalibration"] = {k: v for k, v in recal.items() if not k.startswith("_")}
    with staged_output(out_dir, force=force, inputs=[file]) as tmp:
        names: list[str] = []
        if plots:
            result["_figures"] = {"loo": loo_result, "recal": recal, "label": label,
                                  "key": band_key, "num_levels": num_levels}
            names = _write_plots(kind, result, tmp)
        if recal is not None:
            from bayescal.core import save_calibrator

            for name, calibrator in recal["_calibrators"].items():
                save_calibrator(calibrator, tmp / name)
            report["recalibration"]["files"] = [str(out_dir / k)
                                                for k in recal["_calibrators"]]
            own.update({k: _sha256(tmp / k) for k in recal["_calibrators"]})
        report["calibrator_files"] = own
        report["plots"] = [str(out_dir / name) for name in names]
        report["html"] = str(out_dir / "report.html")
        for s in sections:
            s.figures = [f for f in names if _FIGURE_SECTION.get(f, "main") == s.key]
        images = {name: (tmp / name).read_bytes() for name in names}
        intro = [head, f"Data: {label} ({split_info['reason']})."]
        page = render_html(f"bayescal evaluate: {pathlib.Path(file).name}", intro,
                           sections, images)
        _write_text(tmp / "report.html", page)
        _write_text(tmp / "report.json", json.dumps(report, indent=2))
    print(f"report: {shown(out_dir / 'report.json')}, {shown(out_dir / 'report.html')}")
    return report


def _write_text(path: pathlib.Path, text: str) -> None:
    """Write ``text`` into the staging folder (flushed to disk when it is moved in)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _caveats(kind: str, result: dict[str, Any], n: int) -> list[str]:
    if kind == "classification":
        return _bin_caveats(result["bins"], float(result["metrics"]["MCE"]))
    caveats = []
    if n < 50:
        caveats.append(
            f"caveat: only {n} observations: the calibration curve moves in steps of "
            f"1/{n}, so 'max gap' and single levels are noisy; read the p-values and "
            "the coverage intervals")
    return caveats




def p_cell(p: float | None, num_samples: int = NUM_TEST_SAMPLES) -> str | None:
    """A p-value as shown: 3 decimals; the smallest possible one, ``1 / (1 + B)``, as
    "<= 0.001" (for B = 1000)."""
    if p is None:
        return None
    if p <= 1.5 / (1 + num_samples):
        return f"<= {1 / (1 + num_samples):.3f}"
    return f"{p:.3f}"


def _curve_table(metrics, pvalues, caption) -> Table:
    rows = [[m, metrics["quantile"][m], p_cell(pvalues["quantile"][m]),
             metrics["interval"][m], p_cell(pvalues["interval"][m])] for m in _REG_METRICS]
    return Table(["metric", "quantile curve", "p-value", "interval curve", "p-value"],
                 rows, caption=caption)


def _sections(kind, result, loo_result, recal, label, split_info, caveats):
    """The report's sections, shared by the terminal and the HTML page."""
    sections = []
    test_note = (f"p-value: Monte Carlo test of perfect calibration ({NUM_TEST_SAMPLES} "
                 "simulations, seeded from --seed); small values are evidence of "
                 "miscalibration")
    if kind == "regression":
        main = Section(f"Calibration of the {label}")
        main.tables.append(_curve_table(result["metrics"], result["pvalues"],
                                        "calibration curve metrics"))
        main.tables.append(Table(_COVERAGE_HEADER, _coverage_rows(result["coverage"]),
                                 caption=f"coverage of central intervals ({label})"))
        main.lines.extend(f"{k}: {v:.4f}" for k, v in result["scores"].items())
        main.lines.append(test_note)
        sections.append(main)
        if loo_result is not None:
            pk = loo_result["pareto_k"]
            s = Section(f"Calibration of the {LOO_LABEL}", key="loo")
            s.tables.append(_curve_table(loo_result["metrics"], loo_result["pvalues"],
                                         "calibration curve metrics"))
            s.tables.append(Table(_COVERAGE_HEADER, _coverage_rows(loo_result["coverage"]),
                                  caption="coverage of central intervals (LOO-PIT)"))
            s.lines.append(f"Pareto k max {pk['max']:.2f}, {pk['above 0.7']} of {pk['n']} "
                           "above 0.7")
            sections.append(s)
    else:
        main = Section(f"Calibration of the {label}")
        b = consistency_samples(int(result["_y"].size))
        rows = [[k, v, p_cell(result["pvalues"].get(k), b)]
                for k, v in result["metrics"].items()]
        main.tables.append(Table(["metric", "value", "p-value"], rows,
                                 caption="metrics"))
        bins = [[bin_text(r), r["n"], r["mean prob"],
                 r["frequency"],
                 f"[{r['acceptance_95'][0]:.3f}, {r['acceptance_95'][1]:.3f}]",
                 ", ".join(f for f, on in (("sparse", r["sparse"]),
                                           ("outside", r["outside"])) if on)]
                for r in result["bins"]]
        main.tables.append(Table(["bin", "n", "mean prob", "frequency",
                                  "95% acceptance", "flag"], bins,
                                 caption="bins (empty bins left out)", digits=3))
        main.lines.append("p-value: ECE, MCE by consistency resampling "
                          f"({b} label sets drawn from the probabilities, "
                          "seeded from --seed); Brier by Spiegelhalter's z-test; "
                          "- : not a calibration statistic")
        sections.append(main)
    main.lines.extend(caveats)
    if recal is not None:
        chose = (f" (chose {recal['chosen']})"
                 if recal["method"] == "auto" and "chosen" in recal else "")
        s = Section(f"Recalibration: {recal['method']}{chose}", key="recalibration")
        s.lines.append(
            f"{recal['fitted']}; {recal['n_calibration']} observations for calibration, "
            f"{recal['n_held_out']} held out (--calibration-fraction "
            f"{recal['calibration_fraction']:g}, seeded from --seed)")
        if "verdict" in recal:
            s.lines.append(recal["verdict"]["text"])
        recal["_table"].caption = "before / after, on the held-out part"
        s.tables.append(recal["_table"])
        s.lines.extend(recal.get("caveats", []))
        sections.append(s)
    notes = Section("Notes", key="notes", lines=[f"note: {v}" for v in result["notes"]])
    if notes.lines:
        sections.append(notes)
    return sections


#: The section (Section.key) each figure belongs to; others go to "main".
_FIGURE_SECTION = {"loo_pit_ecdf.png": "loo", "recalibration.png": "recalibration"}


def _write_plots(kind: str, result: dict[str, Any], folder: pathlib.Path) -> list[str]:
    """Draw the plots into ``folder``; return their file names.

    ``result["_figures"]`` holds the LOO-PIT result, the recalibration entry, the
    label of the data split and the key of the bands (from ``--seed``). Titles say
    which PIT and how many observations.
    """
    import jax
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayescal import plot

    extra = result.get("_figures", {})
    loo_result, recal = extra.get("loo"), extra.get("recal")
    label = extra.get("label", "PIT")
    num_levels = extra.get("num_levels", 100)
    key = extra.get("key")
    if key is None:
        key = jax.random.key(0)
    n = int(np.asarray(result["_y"]).size)
    names: list[str] = []

    def save(fig, name):
        fig.savefig(folder / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
        names.append(name)

    if kind == "regression":
        for i, curve_kind in enumerate(result["_curves"]):
            fig, ax = plt.subplots(figsize=(5, 5))
            # from the PIT values: the legend's area is the table's exact area, and the
            # band is the simultaneous band of a calibrated model of this size
            plot.calibration_curve(result["_pit"], ax=ax, labels=[label], kind=curve_kind,
                                   key=jax.random.fold_in(key, 10 + i),
                                   num_levels=num_levels)
            ax.set_title(f"{curve_kind.capitalize()} calibration curve\n{label}, n={n}")
            save(fig, f"calibration_{curve_kind}.png")
        fig, ax = plt.subplots(figsize=(6, 4))
        plot.pit_ecdf(result["_pit"], ax=ax, key=key)
        ax.set_title(f"PIT ECDF difference, 95% simultaneous band\n{label}, n={n}")
        save(fig, "pit_ecdf.png")
        if loo_result is not None:
            fig, ax = plt.subplots(figsize=(6, 4))
            plot.pit_ecdf(loo_result["_pit"], ax=ax, key=jax.random.fold_in(key, 1))
            ax.set_title(f"LOO-PIT ECDF difference, 95% simultaneous band\n"
                         f"PSIS leave-one-out (out-of-sample), n={n}")
            save(fig, "loo_pit_ecdf.png")
        if recal is not None and recal["_before"] is not None:
            fig, ax = plt.subplots(figsize=(5, 5))
            what = "LOO-PIT" if recal["pit"].startswith("LOO") else "PIT"
            curves = {f"before ({what})": np.asarray(recal["_before"]),
                      f"after {recal['method']}": np.asarray(recal["_after"])}
            plot.calibration_curve(curves, ax=ax, kind="quantile",
                                   key=jax.random.fold_in(key, 20), num_levels=num_levels)
            ax.set_title(f"Quantile calibration before/after {recal['method']}\n"
                         f"held-out part, n={recal['n_held_out']}")
            save(fig, "recalibration.png")
    else:
        fig, ax = plt.subplots(figsize=(5, 6))
        plot.reliability_diagram(result["_curve"], ax=ax, edges=result["_edges"])
        ax.set_title(f"Reliability diagram, 95% acceptance intervals\n{label}, n={n}")
        save(fig, "reliability.png")
        if recal is not None:
            from bayescal import classification as clf

            # side by side, with room for each diagram's legend (outside, on its right)
            fig, axes = plt.subplots(1, 2, figsize=(14, 6), gridspec_kw={"wspace": 0.9})
            y = recal["_y_held_out"]
            for ax, (what, q) in zip(axes, (("before", recal["_before"]),
                                            ("after", recal["_after"])), strict=True):
                c = clf.acceptance_intervals(clf.reliability_curve(
                    y, q, bins=result["_edges"].size - 1))
                plot.reliability_diagram(c, ax=ax)
                ax.set_title(f"Held-out part, {what} isotonic, n={y.size}")
            save(fig, "recalibration.png")
    return names
