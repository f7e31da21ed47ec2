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

import json
import math
import pathlib
import stat
from typing import Any

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
from bayescal._cli.output import check_target, staged_output
from bayescal._cli.paths import read_stream, stat_input
from bayescal._cli.report import format_table

__all__ = ["InputError", "load_task", "run_evaluate", "draw_statistics"]

_NETCDF_SUFFIXES = (".nc", ".netcdf", ".nc4", ".h5", ".hdf5")
# how a NetCDF stream begins (netCDF-4 / HDF5, then classic netCDF): a pipe has no suffix
_MAGIC = (b"\x89HDF\r\n\x1a\n", b"CDF\x01", b"CDF\x02", b"CDF\x05")


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
        elif suffix in _NETCDF_SUFFIXES or (data is not None and data.startswith(_MAGIC)):
            fmt = "netcdf"
        else:
            fmt = "csv"
    if stat.S_ISDIR(st.st_mode) and fmt != "zarr":
        raise InputError(f"{path}: is a folder, not a file (a zarr store needs --format zarr)")
    if data is not None and fmt == "zarr":
        raise InputError(f"{path}: is a pipe or FIFO; a zarr store is a folder")
    if fmt in ("netcdf", "zarr"):
        if layout not in (None, "draws", "binary"):
            raise InputError(
                f"{path}: --layout {layout} does not apply to {fmt} files (they hold draws)"
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
            f"{path}: could not be read (the file changed while it was read); run again "
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
    if layout == "normal":
        loc = as_compute("loc", task["loc"], dtype)
        scale = as_compute("scale", task["scale"], dtype)
        _check_normal(y, task["loc"], task["scale"], dtype)
        pit = np.asarray(reg.pit_normal(y, loc, scale))
        scores = {
            "CRPS": float(reg.crps_normal(y, loc, scale)),
            "NLL": float(reg.nll_normal(y, loc, scale)),
            "sharpness (RMS sd)": float(reg.sharpness(scale, root=True)),
        }
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
                     f"{', '.join(f'{v:g}' for v in task['levels'])}; clamped outside")
    else:
        stats = task["_stats"]
        key = None
        if stats["integer"]:
            key = jax.random.key(seed)
            notes.append("PIT randomized between F(y-) and F(y) (integer data)")
        pit = pit_from_counts(stats["le"], stats["lt"], stats["num_draws"], dtype, key)
        scores = {
            "CRPS": float(np.mean(stats["crps"])),
            "sharpness (RMS sd)": float(np.sqrt(np.mean(stats["var"]))),
        }
    metrics, curves = _curve_metrics(pit, num_levels)
    return {"metrics": metrics, "scores": scores, "notes": notes, "_pit": pit,
            "_curves": curves}


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
            "_edges": edges}


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
# LOO-PIT holds the draws and the log-likelihood in memory (float64, as ArviZ's PSIS
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


# ------------------------------------------------------------------------------ run
#: Every file a report may write into --out: --force replaces these and nothing else.
REPORT_FILES = (
    "report.json",
    "calibration_quantile.png",
    "calibration_interval.png",
    "pit_ecdf.png",
    "reliability.png",
    "loo_pit_ecdf.png",
)


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
) -> dict[str, Any]:
    out_dir = pathlib.Path(out)
    stat_input(file)  # a name too long, a device: refused first (nothing read)
    check_target(out_dir, force=force, names=REPORT_FILES, inputs=[file])  # before any work
    dtype = compute_dtype()
    task = load_task(file, fmt=fmt, var_name=var_name, layout=layout)
    try:
        task["y"] = as_compute("y", task["y"], dtype)
        n = task["y"].size
        if n < 2:
            raise InputError(f"{file}: only {n} observation; at least 2 are needed")
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
        src = task.get("draws")
        loo_result = None
        if (loo and kind == "regression" and isinstance(src, DrawSource)
                and src.has_log_likelihood):
            loo_result = _loo_report(src, dtype, num_levels, seed,
                                     bool(task["_stats"]["integer"]))
            if "skipped" in loo_result:
                result["notes"].append(loo_result["skipped"])
                loo_result = None
    except InputError as err:
        raise InputError(f"{file}: {err}" if not str(err).startswith(str(file)) else
                         str(err)) from None
    finally:
        if isinstance(task.get("draws"), DrawSource):
            task["draws"].close()
    result["notes"] = task.get("notes", []) + result["notes"]
    interrupt.check()  # a Ctrl-C swallowed on the way (see interrupt): no table

    print(f"{file}: {kind}, {n} observations, from {task['source']}")
    if kind == "regression":
        header = ["curve", "MACE", "RMSCE", "max gap", "area (exact)"]
        rows = [
            [k, *(result["metrics"][k][h] for h in header[1:])]
            for k in ("quantile", "interval")
        ]
        print(format_table(header, rows))
    else:
        rows = [[k, v] for k, v in result["metrics"].items()]
        print(format_table(["metric", "value"], rows))
    for k, v in result["scores"].items():
        print(f"{k}: {v:.4f}")
    if loo_result is not None:
        pk = loo_result["pareto_k"]
        print(f"LOO-PIT (PSIS, from the log_likelihood group; Pareto k max {pk['max']:.2f}, "
              f"{pk['above 0.7']} of {pk['n']} above 0.7):")
        print(format_table(header, [
            [k, *(loo_result["metrics"][k][h] for h in header[1:])]
            for k in ("quantile", "interval")
        ]))
        if pk["above 0.7"]:
            result["notes"].append(
                f"{pk['above 0.7']} observations have Pareto k > 0.7: their LOO-PIT values "
                "are unreliable")
    for note in result["notes"]:
        print(f"note: {note}")

    report = {
        "file": str(file),
        "task": kind,
        "layout": task["layout"],
        "source": task["source"],
        "n": int(n),
        "dtype": dtype.name,
        "metrics": result["metrics"],
        "scores": result["scores"],
        "notes": result["notes"],
        "plots": [],
    }
    if loo_result is not None:
        report["loo"] = {k: loo_result[k] for k in ("metrics", "pareto_k", "randomized")}
    with staged_output(out_dir, force=force, inputs=[file]) as tmp:
        names = _write_plots(kind, result, tmp) if plots else []
        if plots and loo_result is not None:
            names.append(_save_pit_ecdf(loo_result["_pit"], tmp, "loo_pit_ecdf.png",
                                        "LOO-PIT (PSIS)"))
        report["plots"] = [str(out_dir / name) for name in names]
        with open(tmp / "report.json", "w", encoding="utf-8") as f:
            f.write(json.dumps(report, indent=2))
    print(f"report: {out_dir / 'report.json'}")
    return report


def _write_plots(kind: str, result: dict[str, Any], folder: pathlib.Path) -> list[str]:
    """Draw the plots into ``folder``; return their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayescal import plot

    names = []
    if kind == "regression":
        for curve_kind, curve in result["_curves"].items():
            fig, ax = plt.subplots(figsize=(5, 5))
            plot.calibration_curve(curve, ax=ax, labels=[f"{curve_kind} curve"])
            names.append(f"calibration_{curve_kind}.png")
            fig.savefig(folder / names[-1], dpi=110, bbox_inches="tight")
            plt.close(fig)
        names.append(_save_pit_ecdf(result["_pit"], folder, "pit_ecdf.png"))
    else:
        fig, ax = plt.subplots(figsize=(5, 6))
        plot.reliability_diagram(result["_curve"], ax=ax, edges=result["_edges"])
        names.append("reliability.png")
        fig.savefig(folder / names[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    return names



def _save_pit_ecdf(pit, folder: pathlib.Path, name: str, title: str | None = None) -> str:
    """A PIT ECDF figure saved as ``folder / name``; returns ``name``."""
    import matplotlib.pyplot as plt

    from bayescal import plot

    fig, ax = plt.subplots(figsize=(6, 4))
    plot.pit_ecdf(pit, ax=ax)
    if title:
        ax.set_title(title)
    fig.savefig(folder / name, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return name
