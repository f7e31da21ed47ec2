"""``bayescal evaluate FILE``: metrics, a table, a JSON report and plots from a file.

Inputs:

- a NetCDF file written by ArviZ (``InferenceData.to_netcdf``; any PPL through ArviZ)
  with ``posterior_predictive`` and ``observed_data`` groups;
- a CSV file with named columns: ``y,loc,scale`` (Normal predictives), ``y,prob``
  (binary classifier) or ``y`` plus one column per predictive draw (``draw_*``).

Every problem with the input is reported as one line and exit status 2; the report is
written only when everything succeeded (never a partial report).
"""

from __future__ import annotations

import csv
import json
import math
import os
import pathlib
import tempfile
from typing import Any

import numpy as np

from bayescal._cli.report import format_table


class InputError(Exception):
    """Raised for a bad input file; the CLI prints it as one line, exit status 2."""


# --------------------------------------------------------------------------- reading
def _read_csv(path: pathlib.Path) -> dict[str, np.ndarray]:
    try:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not a text CSV file ({err.reason})") from None
    except OSError as err:
        raise InputError(f"{path}: cannot read the file ({err.strerror})") from None
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"{path}: the CSV file is empty")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        raise InputError(f"{path}: duplicate column names in the header {header}")
    body = rows[1:]
    if not body:
        raise InputError(f"{path}: the CSV file has a header but no data rows")
    columns: dict[str, list[str]] = {h: [] for h in header}
    for lineno, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {lineno} has {len(row)} fields but the header has {len(header)}"
            )
        for h, v in zip(header, row, strict=True):
            columns[h].append(v.strip())
    out = {}
    for h, values in columns.items():
        try:
            arr = np.asarray([float(v) for v in values], dtype=np.float64)
        except ValueError:
            bad = next(v for v in values if not _is_float(v))
            raise InputError(
                f"{path}: column '{h}' is not numeric (value {bad!r})"
            ) from None
        out[h] = arr
    return out


def _is_float(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def _check_finite(path: pathlib.Path, name: str, arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        n_nan = int(np.isnan(arr).sum())
        raise InputError(
            f"{path}: '{name}' has {n_nan} NaN and {int(bad.sum()) - n_nan} infinite values; "
            "drop or impute those rows first"
        )


def _task_from_csv(path: pathlib.Path) -> dict[str, Any]:
    cols = _read_csv(path)
    names = set(cols)
    if "y" not in names:
        raise InputError(
            f"{path}: no 'y' column; expected columns y,loc,scale or y,prob or y,draw_1,... "
            f"(found: {', '.join(cols)})"
        )
    for name, arr in cols.items():
        _check_finite(path, name, arr)
    y = cols["y"]
    draws = sorted((n for n in names if n.startswith("draw")), key=_natural_key)
    if {"loc", "scale"} <= names:
        if (cols["scale"] <= 0).any():
            raise InputError(
                f"{path}: column 'scale' must be > 0 (found {int((cols['scale'] <= 0).sum())} values <= 0)"
            )
        return {
            "task": "regression",
            "source": "csv (Normal loc/scale)",
            "y": y,
            "loc": cols["loc"],
            "scale": cols["scale"],
        }
    if "prob" in names:
        p = cols["prob"]
        if ((p < 0) | (p > 1)).any():
            raise InputError(
                f"{path}: column 'prob' must lie in [0, 1] (min {p.min()}, max {p.max()})"
            )
        if not np.isin(y, (0.0, 1.0)).all():
            raise InputError(
                f"{path}: with a 'prob' column, 'y' must hold 0/1 labels (found {np.unique(y)[:5]})"
            )
        return {
            "task": "classification",
            "source": "csv (probabilities)",
            "y": y,
            "prob": p,
        }
    if len(draws) >= 2:
        return {
            "task": "regression",
            "source": f"csv ({len(draws)} draw columns)",
            "y": y,
            "draws": np.stack([cols[d] for d in draws]),
        }
    raise InputError(
        f"{path}: cannot tell what the columns mean; expected y,loc,scale or y,prob or "
        f"y plus draw_1, draw_2, ... (found: {', '.join(cols)})"
    )


def _natural_key(name: str):
    digits = "".join(c for c in name if c.isdigit())
    return (int(digits) if digits else -1, name)


def _task_from_netcdf(path: pathlib.Path, var_name: str | None) -> dict[str, Any]:
    try:
        import arviz as az
    except ImportError as err:  # pragma: no cover - arviz is a runtime dependency
        raise InputError(f"reading NetCDF needs arviz ({err})") from None
    try:
        data = az.from_netcdf(str(path))
    except Exception as err:  # noqa: BLE001 - any reader failure is a bad file
        raise InputError(
            f"{path}: not a readable ArviZ NetCDF file ({type(err).__name__}: {err})"
        ) from None
    groups = list(data.groups())
    missing = [g for g in ("posterior_predictive", "observed_data") if g not in groups]
    if missing:
        raise InputError(
            f"{path}: missing group(s) {', '.join(missing)}; the file has: {', '.join(groups) or 'none'}"
        )
    pp, obs = data["posterior_predictive"], data["observed_data"]
    shared = [v for v in pp.data_vars if v in obs.data_vars]
    if var_name is None:
        if len(shared) != 1:
            raise InputError(
                f"{path}: {'no' if not shared else 'several'} variables in both posterior_predictive "
                f"and observed_data ({', '.join(shared) or 'none'}); choose one with --var-name"
            )
        var_name = shared[0]
    elif var_name not in shared:
        raise InputError(
            f"{path}: variable '{var_name}' not in both groups; available: {', '.join(shared) or 'none'}"
        )
    y = np.asarray(obs[var_name].values, dtype=np.float64).ravel()
    draws = np.asarray(pp[var_name].values, dtype=np.float64)
    draws = draws.reshape(-1, y.size)  # (chain, draw, *obs) -> [S, N]
    _check_finite(path, f"observed_data/{var_name}", y)
    _check_finite(path, f"posterior_predictive/{var_name}", draws)
    binary = np.isin(y, (0.0, 1.0)).all() and np.isin(draws, (0.0, 1.0)).all()
    if binary:
        return {
            "task": "classification",
            "source": f"netcdf ({var_name}, Bernoulli draws)",
            "y": y,
            "prob": draws.mean(0),
        }
    return {"task": "regression", "source": f"netcdf ({var_name})", "y": y, "draws": draws}


def load_task(
    path_str: str, *, fmt: str = "auto", var_name: str | None = None
) -> dict[str, Any]:
    path = pathlib.Path(path_str)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a file")
    if fmt == "auto":
        suffix = path.suffix.lower()
        fmt = "netcdf" if suffix in (".nc", ".netcdf", ".nc4", ".h5") else "csv"
    if fmt == "netcdf":
        return _task_from_netcdf(path, var_name)
    return _task_from_csv(path)


# --------------------------------------------------------------------------- metrics
def _regression_report(task: dict[str, Any], num_levels: int, seed: int) -> dict[str, Any]:
    import jax

    from bayescal import regression as reg

    y = task["y"]
    if "draws" in task:
        key = jax.random.key(seed)
        discrete = bool(
            np.all(task["draws"] == np.round(task["draws"])) and np.all(y == np.round(y))
        )
        pit = reg.pit_draws(y, task["draws"], key=key if discrete else None)
        scores = {
            "CRPS": float(reg.crps_draws(y, task["draws"])),
            "sharpness (RMS sd)": float(reg.sharpness(draws=task["draws"], root=True)),
        }
        notes = ["PIT randomized between F(y-) and F(y) (integer data)"] if discrete else []
    else:
        pit = reg.pit_normal(y, task["loc"], task["scale"])
        scores = {
            "CRPS": float(reg.crps_normal(y, task["loc"], task["scale"])),
            "NLL": float(reg.nll_normal(y, task["loc"], task["scale"])),
            "sharpness (RMS sd)": float(reg.sharpness(task["scale"], root=True)),
        }
        notes = []
    metrics = {}
    for kind in ("quantile", "interval"):
        metrics[kind] = {
            "MACE": float(reg.calibration_error(pit, kind=kind, num_levels=num_levels)),
            "RMSCE": float(
                reg.calibration_error(pit, kind=kind, norm="l2", num_levels=num_levels)
            ),
            "max gap": float(
                reg.calibration_error(pit, kind=kind, norm="max", num_levels=num_levels)
            ),
            "area (exact)": float(reg.miscalibration_area(pit, kind=kind)),
        }
    curves = {
        kind: reg.calibration_curve(pit, num_levels=num_levels, kind=kind)
        for kind in ("quantile", "interval")
    }
    return {
        "metrics": metrics,
        "scores": scores,
        "notes": notes,
        "_pit": np.asarray(pit),
        "_curves": curves,
    }


def _classification_report(task: dict[str, Any], bins: int) -> dict[str, Any]:
    from bayescal import classification as clf

    y, p = task["y"].astype(np.int32), task["prob"]
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
    return {"metrics": metrics, "scores": {}, "notes": [], "_curve": curve, "_edges": edges}


def _atomic_write(path: pathlib.Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _to_compute_dtype(task: dict[str, Any]) -> dict[str, Any]:
    """float64 from the file -> the dtype JAX computes in (float32 unless x64 is on)."""
    import jax

    dtype = np.float64 if jax.config.read("jax_enable_x64") else np.float32
    return {k: v.astype(dtype) if isinstance(v, np.ndarray) else v for k, v in task.items()}


def run_evaluate(
    file: str,
    *,
    out: str,
    fmt: str = "auto",
    var_name: str | None = None,
    num_levels: int = 100,
    bins: int = 15,
    seed: int = 0,
    plots: bool = True,
) -> dict[str, Any]:
    task = _to_compute_dtype(load_task(file, fmt=fmt, var_name=var_name))
    n = task["y"].size
    if n < 2:
        raise InputError(f"{file}: only {n} observation; at least 2 are needed")
    if task["task"] == "regression":
        result = _regression_report(task, num_levels, seed)
    else:
        result = _classification_report(task, bins)

    print(f"{file}: {task['task']}, {n} observations, from {task['source']}")
    if task["task"] == "regression":
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
    for note in result["notes"]:
        print(f"note: {note}")

    out_dir = pathlib.Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if plots:
        written = _write_plots(task, result, out_dir)
    report = {
        "file": str(file),
        "task": task["task"],
        "source": task["source"],
        "n": int(n),
        "metrics": result["metrics"],
        "scores": result["scores"],
        "notes": result["notes"],
        "plots": [str(p) for p in written],
    }
    _atomic_write(out_dir / "report.json", json.dumps(report, indent=2))
    print(f"report: {out_dir / 'report.json'}")
    return report


def _write_plots(
    task: dict[str, Any], result: dict[str, Any], out_dir: pathlib.Path
) -> list[pathlib.Path]:
    """Draw the plots into ``out_dir`` (needs bayescal.plot)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayescal import plot

    written = []
    if task["task"] == "regression":
        for kind, curve in result["_curves"].items():
            fig, ax = plt.subplots(figsize=(5, 5))
            plot.calibration_curve(curve, ax=ax, labels=[f"{kind} curve"])
            written.append(out_dir / f"calibration_{kind}.png")
            fig.savefig(written[-1], dpi=110, bbox_inches="tight")
            plt.close(fig)
        fig, ax = plt.subplots(figsize=(6, 4))
        plot.pit_ecdf(result["_pit"], ax=ax)
        written.append(out_dir / "pit_ecdf.png")
        fig.savefig(written[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    else:
        fig, ax = plt.subplots(figsize=(5, 6))
        plot.reliability_diagram(result["_curve"], ax=ax, edges=result["_edges"])
        written.append(out_dir / "reliability.png")
        fig.savefig(written[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    return written
