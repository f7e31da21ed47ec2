"""Plots of calibration: curves, reliability diagrams, PIT ECDFs and histograms.

Matplotlib is imported when a function is first called, not when this module is
imported. Every function takes ``ax=None`` (a new figure is created) or an existing
:class:`matplotlib.axes.Axes`, draws on it and returns it. The functions draw what they
are given (``CalibrationCurve`` objects, PIT values, scales); the statistics come from
:mod:`bayescal.regression`, :mod:`bayescal.classification` and :mod:`bayescal.core`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

if TYPE_CHECKING:
    from bayescal.core import BinStrategy, CurveKind

__all__ = [
    "calibration_curve",
    "reliability_diagram",
    "pit_ecdf",
    "pit_histogram",
    "sharpness",
    "smooth_reliability_diagram",
]

_DIAGONAL = {"color": "0.35", "linestyle": "--", "linewidth": 1.0}


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(
            "bayescal.plot needs matplotlib, which is not installed: pip install matplotlib"
        ) from err
    return plt


def _axes(
    ax: Any, figsize: tuple[float, float] = (4.8, 4.8), layout: Any = "constrained"
) -> Any:
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout=layout)
        return ax
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None; got {type(ax).__name__}.")
    return ax


def _curve_type():
    from bayescal.core import CalibrationCurve

    return CalibrationCurve


def _check_curve(curve: Any, name: str) -> Any:
    cls = _curve_type()
    if not isinstance(curve, cls):
        raise TypeError(
            f"{name} must be a CalibrationCurve (from bayescal.regression.calibration_curve "
            f"or bayescal.classification.reliability_curve); got {type(curve).__name__}."
        )
    return curve


@overload
def _np(x: None) -> None: ...
@overload
def _np(x: Any) -> np.ndarray: ...
def _np(x: Any) -> np.ndarray | None:
    return None if x is None else np.asarray(x, dtype=float)


def _color(i: int, color: Any = None) -> Any:
    return color if color is not None else f"C{i % 10}"


def _legend_below(ax: Any, ncols: int) -> None:
    """Legend under the x label, off the data (constrained layout makes room)."""
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncols=ncols,
        fontsize="small",
        frameon=False,
    )


def _legend_right(ax: Any, may_go_below: bool = False) -> None:
    """Legend to the right of the square axes, off the data (constrained layout makes
    room); with ``may_go_below`` (axes with nothing drawn under them), under them, in
    one column, where the axes' slot leaves too little room on the right: a wide legend
    beside a square would shrink the square to a fraction of its slot (e.g. several
    long labels at ``figsize=(7, 5)``)."""
    legend = ax.legend(
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        fontsize="small",
        frameon=False,
    )
    if not may_go_below:
        return
    fig = ax.figure
    try:
        renderer = fig.canvas.get_renderer()
        legend_w = legend.get_window_extent(renderer).width / fig.dpi
    except (AttributeError, TypeError, ValueError):  # a canvas that cannot measure text
        return
    fig_w, fig_h = fig.get_size_inches()
    slot = ax.get_position(original=True)
    slot_w, slot_h = slot.width * fig_w, slot.height * fig_h
    # the square takes the slot's height (less the axis labels' ~0.8 in); the legend gets
    # what is left of the width
    if legend_w > slot_w - max(min(slot_w, slot_h) - 0.8, 0.5 * slot_w):
        legend.remove()
        _legend_below(ax, ncols=1)


def _reference_line(ax: Any, x: Any, y: Any, label: str) -> None:
    """Draw the reference line once per axes, even when several curves share it."""
    if any(line.get_label() == label for line in ax.get_lines()):
        return
    ax.plot(x, y, label=label, **_DIAGONAL)


def _unit_square(ax: Any) -> None:
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal", adjustable="box")


def _check_level(level: Any) -> float:
    if isinstance(level, bool) or not isinstance(level, int | float | np.floating):
        raise TypeError(f"level must be a float in (0, 1), e.g. 0.95; got {level!r}.")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(
            f"level must lie strictly between 0 and 1 (e.g. 0.95 for a 95% band); got "
            f"{level!r}."
        )
    return float(level)


def _host_array(x: Any, name: str, what: str) -> np.ndarray:
    """A 1-D, non-empty, finite float64 numpy array (the plots work on the host)."""
    try:
        a = np.asarray(x)
    except Exception as err:
        raise TypeError(
            f"{name} must be an array of numbers; got {type(x).__name__}."
        ) from err
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        if a.dtype.name != "bfloat16":
            raise TypeError(f"{name} must be an array of numbers; got dtype {a.dtype}.")
    a = a.astype(float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D; got shape {a.shape}. Reshape it (.ravel()).")
    if a.size == 0:
        raise ValueError(
            f"{name} is empty (shape {a.shape}); at least one value is needed."
        )
    if not np.all(np.isfinite(a)):
        n_nan = int(np.isnan(a).sum())
        raise ValueError(
            f"{name} contains {n_nan} NaN and {int(np.isinf(a).sum())} infinite values; all "
            f"{what} must be finite. Drop or impute those observations first."
        )
    return a


def _check_pit(pit: Any) -> np.ndarray:
    u = _host_array(pit, "pit", "PIT values")
    if np.any((u < 0) | (u > 1)):
        raise ValueError(
            f"pit must lie in [0, 1]; got values outside it (min {u.min()!r}, max "
            f"{u.max()!r}). PIT values are probabilities: check the input is not a raw "
            "score, a logit or a percentage."
        )
    return u


# ------------------------------------------------------------ calibration curve

_AXIS_LABELS = {
    None: ("expected proportion", "observed proportion"),
    "quantile": (
        "expected proportion (quantile level $p$)",
        "observed proportion below the $p$-quantile",
    ),
    "interval": (
        "expected proportion (central interval level $p$)",
        "observed proportion inside the interval",
    ),
}

_CALIBRATION_CURVE_CALLS = (
    "plot.calibration_curve(pit, key=0) with PIT values (e.g. "
    "bayescal.regression.pit_normal(y, loc, scale)), or "
    "plot.calibration_curve(bayescal.regression.calibration_curve(pit)); for a "
    "classifier's labels and probabilities call plot.reliability_diagram(y_true, y_prob)"
)


def _same_band(a: Any, b: Any) -> bool:
    pairs = [(a.expected, b.expected), (a.lower, b.lower), (a.upper, b.upper)]
    for p, q in pairs:
        p, q = _np(p), _np(q)
        if p.shape != q.shape or not np.allclose(p, q, equal_nan=True):
            return False
    return True


def _looks_binary(x: Any) -> bool:
    try:
        a = np.asarray(x, dtype=float)
    except Exception:
        return False
    return a.ndim == 1 and a.size > 0 and bool(np.all((a == 0) | (a == 1)))


def _check_call(name: str, calls: str, max_positional: int, args: tuple) -> None:
    """A call with too many positional arguments names the call to make instead."""
    if len(args) > max_positional:
        hint = ""
        if name == "calibration_curve" and len(args) == 2 and _looks_binary(args[0]):
            hint = (
                " The first two arguments look like a classifier's (y_true, y_prob): "
                "call plot.reliability_diagram(y_true, y_prob, bins=10)."
            )
        raise TypeError(
            f"plot.{name} takes at most {max_positional} positional argument"
            f"{'s' if max_positional > 1 else ''}; got {len(args)}.{hint} Call {calls}."
        )


def _kind_word(kind: str | None) -> str:
    return "area" if kind is None else f"area ({kind})"


def calibration_curve(
    curve_or_curves: Any,
    *args: Any,
    ax: Any = None,
    labels: Sequence[str] | None = None,
    band: bool = True,
    shade_area: bool = True,
    kind: CurveKind | None = None,
    band_label: str | None = None,
    colors: Sequence[Any] | None = None,
    key: Any = None,
    level: float = 0.95,
    num_levels: int = 100,
    num_samples: int = 1000,
) -> Any:
    """Draw one or several calibration curves against the diagonal.

    Each curve is drawn as a line of observed against expected proportion, with the
    area between it and the diagonal shaded (its value, and its kind, in the legend)
    and, when the curve carries ``lower`` / ``upper``, its band. The legend sits
    outside the axes, so it never covers a curve.

    PIT values are accepted as well as curves: ``calibration_curve(pit, key=0)``
    computes :func:`bayescal.regression.calibration_curve` (``kind``, default
    ``"quantile"``), writes its exact area
    (:func:`bayescal.regression.miscalibration_area`, the number a table of metrics
    reports) and, with a ``key``, draws the ``level`` simultaneous band of a
    calibrated model (:func:`bayescal.regression.pit_ecdf_band`; the central-interval
    curve is the ECDF of :math:`|2u - 1|`, uniform under calibration too, so the same
    band applies).

    Parameters
    ----------
    curve_or_curves : CalibrationCurve, PIT values, or a sequence / mapping of them
        A curve, e.g. from :func:`bayescal.regression.calibration_curve`; a curve with
        a band from :func:`bayescal.regression.bootstrap_calibration_curve`, or
        ``curve._replace(lower=band.lower, upper=band.upper)`` with
        :func:`bayescal.regression.pit_ecdf_band`. Or a 1-D array of PIT values in
        [0, 1]. A mapping ``label -> curve or PIT values`` draws several models.
    *args
        Not accepted: further positional arguments raise a ``TypeError`` that names
        the call to make.
    ax : matplotlib Axes, optional
    labels : sequence of str, optional
        Legend labels (default: the mapping's keys, or "model 1", "model 2", ...).
    band : bool, default True
        Draw ``lower`` / ``upper`` where a curve has them (for PIT values: the band
        under calibration, when ``key`` is given).
    shade_area : bool, default True
        Shade the area between each curve and the diagonal.
    kind : {None, "quantile", "interval"}
        The curve's kind: the axis labels and the legend's "area (kind)" say it. For
        PIT values it also picks the curve (None: "quantile").
    band_label : str, optional
        Legend text for the bands (default "band", or for PIT values e.g. "95%
        simultaneous band under calibration (n=200)").
    colors : sequence of colors, optional
    key : PRNG key or int seed, optional
        For PIT values: the randomness of the simulated band (none without a key;
        bayescal never uses a hidden fixed key).
    level : float in (0, 1), default 0.95
        Level of that band.
    num_levels : int, default 100
        For PIT values: levels of the curve and points of the band.
    num_samples : int, default 1000
        For PIT values: simulations of the band.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    TypeError
        For a call with more than one positional argument (e.g. ``(y, loc, scale)``
        or a classifier's ``(y_true, y_prob)``): the message names the call to make.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal import plot, regression
    >>> ax = plot.calibration_curve(regression.calibration_curve([0.1, 0.4, 0.5, 0.9]))
    >>> ax.get_xlabel()
    'expected proportion'
    >>> ax = plot.calibration_curve([0.1, 0.4, 0.5, 0.9], key=0, kind="interval")
    >>> ax.get_legend().get_texts()[1].get_text()
    '95% simultaneous band under calibration (n=4)'
    """
    from bayescal import regression as reg
    from bayescal.core import curve_area

    _check_call("calibration_curve", _CALIBRATION_CURVE_CALLS, 1, (curve_or_curves, *args))
    if kind not in _AXIS_LABELS:
        raise ValueError(f"kind must be None, 'quantile' or 'interval'; got {kind!r}.")
    level = _check_level(level)
    cls = _curve_type()
    names: Sequence[str | None] | None
    if isinstance(curve_or_curves, Sequence | Mapping) and len(curve_or_curves) == 0:
        raise ValueError(
            "curve_or_curves is empty; pass PIT values, a curve, or several of them."
        )
    if isinstance(curve_or_curves, Mapping):
        names = [str(k) for k in curve_or_curves]
        items = list(curve_or_curves.values())
    elif isinstance(curve_or_curves, cls):
        items, names = [curve_or_curves], None
    elif (
        isinstance(curve_or_curves, Sequence)
        and not isinstance(curve_or_curves, str)
        and len(curve_or_curves) > 0
        and all(isinstance(c, cls) or np.ndim(c) == 1 for c in curve_or_curves)
    ):  # curves, or one PIT array per model
        items, names = list(curve_or_curves), None
    elif isinstance(curve_or_curves, str | bytes) or np.ndim(curve_or_curves) != 1:
        raise TypeError(
            "curve_or_curves must be a CalibrationCurve, a 1-D array of PIT values, or a "
            f"sequence or mapping label -> either; got {type(curve_or_curves).__name__}. "
            f"Call {_CALIBRATION_CURVE_CALLS}."
        )
    else:  # one 1-D array of PIT values
        items, names = [curve_or_curves], None
    curve_kind: CurveKind = kind or "quantile"
    curves, areas, from_pit = [], [], []
    for i, c in enumerate(items):
        if isinstance(c, cls):
            curves.append(c)
            areas.append(float(curve_area(c)))
            from_pit.append(False)
            continue
        try:
            u = _check_pit(c)
        except TypeError as err:
            raise TypeError(
                f"curve_or_curves[{i}] must be a CalibrationCurve or PIT values; got "
                f"{type(c).__name__}. Call {_CALIBRATION_CURVE_CALLS}."
            ) from err
        cu = reg.calibration_curve(u, num_levels=num_levels, kind=curve_kind)
        if band and key is not None:
            b = reg.pit_ecdf_band(
                key, u.size, level=level, num_points=num_levels, num_samples=num_samples
            )
            cu = cu._replace(lower=b.lower, upper=b.upper)
        curves.append(cu)
        areas.append(float(reg.miscalibration_area(u, kind=curve_kind)))
        from_pit.append(u.size)
    if any(from_pit) and kind is None:
        kind = "quantile"
    if band_label is None:
        sizes = {n for n in from_pit if n}
        if key is not None and sizes and len(sizes) == 1 and all(from_pit):
            band_label = f"{level:.0%} simultaneous band under calibration (n={sizes.pop()})"
        elif key is not None and any(from_pit):
            band_label = f"{level:.0%} simultaneous band under calibration"
        else:
            band_label = "band"
    if labels is not None:
        labels = [str(s) for s in labels]
        if len(labels) != len(curves):
            raise ValueError(
                f"labels has {len(labels)} entries but there are {len(curves)} curves."
            )
        names = labels
    if names is None:
        names = (
            [None] if len(curves) == 1 else [f"model {i + 1}" for i in range(len(curves))]
        )

    ax = _axes(ax, figsize=(7.2, 4.8))
    _reference_line(ax, [0, 1], [0, 1], "ideal")
    with_band = [c for c in curves if c.lower is not None and c.upper is not None]
    shared = (
        band
        and len(curves) > 1
        and len(with_band) == len(curves)
        and all(_same_band(with_band[0], c) for c in with_band[1:])
    )
    if shared:  # e.g. one band under calibration for models evaluated on the same n
        c0 = with_band[0]
        ax.fill_between(
            _np(c0.expected),
            _np(c0.lower),
            _np(c0.upper),
            color="0.5",
            alpha=0.22,
            linewidth=0,
            label=band_label,
        )
    hatches = ("////", "\\\\\\\\", "||||", "----", "xxxx")
    word = _kind_word(kind)
    for i, (c, name, area) in enumerate(zip(curves, names, areas, strict=True)):
        color = _color(i, None if colors is None else colors[i])
        x, y = _np(c.expected), _np(c.observed)
        if band and not shared and c.lower is not None and c.upper is not None:
            ax.fill_between(
                x,
                _np(c.lower),
                _np(c.upper),
                color=color,
                alpha=0.2,
                linewidth=0,
                label=band_label if len(curves) == 1 else f"{name}: {band_label}",
            )
        if shade_area:
            ax.fill_between(
                x,
                y,
                x,
                facecolor="none",
                edgecolor=color,
                hatch=hatches[i % len(hatches)],
                linewidth=0,
                alpha=0.5,
                label=f"miscalibration {word} = {area:.3f}" if name is None else None,
            )
        line_label = "observed" if name is None else f"{name}: {word} = {area:.3f}"
        ax.plot(x, y, color=color, linewidth=1.8, label=line_label)
    xlabel, ylabel = _AXIS_LABELS[kind]
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _unit_square(ax)
    _legend_right(ax, may_go_below=True)
    return ax


# ---------------------------------------------------------- reliability diagram

_RELIABILITY_CALLS = (
    "plot.reliability_diagram(y_true, y_prob, bins=10) with labels and predicted "
    "probabilities, or plot.reliability_diagram(curve) with curve = "
    "bayescal.classification.reliability_curve(y_true, y_prob)"
)


def _bin_edges(x: np.ndarray, k: int, edges: Any) -> np.ndarray | None:
    """Edges given, or uniform edges when every bin's mean lies in its uniform bin."""
    if edges is not None:
        e = np.asarray(edges, dtype=float)
        if e.ndim != 1 or e.size != k + 1 or np.any(np.diff(e) < 0):
            raise ValueError(
                f"edges must be {k + 1} nondecreasing values (one more than the {k} "
                f"bins); got shape {e.shape}."
            )
        return e
    e = np.linspace(0.0, 1.0, k + 1)
    ok = np.isnan(x) | ((x >= e[:-1] - 1e-9) & (x <= e[1:] + 1e-9))
    return e if ok.all() else None


def _marker_sizes(w: np.ndarray) -> np.ndarray:
    """Marker areas (points^2) growing with the count: 8 for 1 case, 90 for the most."""
    top = max(float(w.max()), 1.0)
    return 8.0 + 82.0 * np.sqrt(np.clip(w, 0, None) / top)


def reliability_diagram(
    curve: Any,
    y_prob: Any = None,
    *args: Any,
    bins: Any = None,
    strategy: BinStrategy = "uniform",
    level: float = 0.95,
    min_count: int = 10,
    ax: Any = None,
    style: str = "points",
    intervals: bool = True,
    histogram: bool = True,
    corp: Any = None,
    edges: Any = None,
    hist_ax: Any = None,
    label: str | None = None,
    color: Any = None,
    interval_label: str | None = None,
    log_counts: bool = False,
) -> Any:
    """Reliability diagram of a binned classifier curve, with counts and intervals.

    Observed frequency against mean predicted probability per bin, as points or bars,
    the diagonal, per-bin intervals from ``curve.lower`` / ``curve.upper`` (e.g.
    :func:`bayescal.classification.acceptance_intervals`, drawn around the diagonal),
    a histogram of the counts per bin below, and optionally a CORP (PAV) curve with its
    consistency band (:func:`bayescal.core.corp_consistency_band`).

    Two calls: ``reliability_diagram(y_true, y_prob, bins=10)`` bins the labels and
    probabilities (:func:`bayescal.classification.reliability_curve`) and adds the
    ``level`` acceptance intervals of a calibrated model
    (:func:`bayescal.classification.acceptance_intervals`); it draws the same as
    ``reliability_diagram(acceptance_intervals(reliability_curve(y_true, y_prob,
    bins=10)))``. ``reliability_diagram(curve)`` draws a curve; a binned curve
    (one with ``edges``) without ``lower`` / ``upper`` gets its acceptance intervals.

    A bin's marker area grows with its count, and bins with fewer than ``min_count``
    cases are drawn hollow and faded, and the connecting line breaks at them: a
    frequency of 0 or 1 from three cases is noise, which its wide interval shows. The legend sits
    to the right of the axes, off the data.

    Parameters
    ----------
    curve : CalibrationCurve, or y_true when ``y_prob`` is given
        ``expected`` = mean prediction per bin, ``observed`` = frequency of positives,
        ``weight`` = count per bin (empty bins, weight 0, are not drawn). With
        ``y_prob``: the binary labels, shape [N].
    y_prob : array_like, shape [N], optional
        Predicted probabilities of class 1 (then ``curve`` holds the labels).
    *args
        Not accepted: further positional arguments raise a ``TypeError`` that names
        the call to make.
    bins, strategy
        For labels and probabilities: passed to ``reliability_curve`` (``bins``
        default: its default).
    level : float in (0, 1), default 0.95
        Level of the acceptance intervals computed here.
    min_count : int, default 10
        Bins with fewer cases are drawn as small-count bins.
    ax : matplotlib Axes, optional
    style : {"points", "bars"}
    intervals : bool, default True
        Draw ``curve.lower`` / ``curve.upper`` as vertical bars at each bin's mean
        prediction.
    histogram : bool, default True
        Add a panel with the count per bin below the diagram (``hist_ax``, or an
        inset axes under ``ax``, which constrained layout makes room for).
    corp : CalibrationCurve, optional
        A CORP curve: ``expected`` = sorted forecasts, ``observed`` = the PAV fit, and
        ``lower`` / ``upper`` = a consistency band; drawn as a step function.
    edges : array_like, shape [K + 1], optional
        Bin edges, for bars and the histogram. Default: the curve's own ``edges``
        (set by ``reliability_curve``); for a curve without them, uniform edges when
        every bin's mean lies in its uniform bin, otherwise bars centred at the means.
    hist_ax : matplotlib Axes, optional
        Where to draw the histogram.
    label : str, optional
        Legend label of the observed frequencies (default "observed frequency").
    color : color, optional
    interval_label : str, optional
        Default "acceptance interval" (for intervals computed here: "95% acceptance
        interval (calibrated)").
    log_counts : bool, default False
        Log scale for the histogram.

    Returns
    -------
    matplotlib.axes.Axes
        The main axes (the histogram panel is ``ax.figure.axes[-1]`` when created).

    Raises
    ------
    TypeError
        For one array without ``y_prob``, or more than two positional arguments: the
        message names the call to make.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import jax.numpy as jnp
    >>> from bayescal import plot
    >>> from bayescal.core import CalibrationCurve
    >>> c = CalibrationCurve(jnp.array([0.2, 0.7]), jnp.array([0.25, 0.6]), jnp.array([40, 60]))
    >>> ax = plot.reliability_diagram(c)
    >>> ax.get_ylabel()
    'observed frequency of class 1'
    >>> ax = plot.reliability_diagram([0, 0, 1, 1, 1], [0.1, 0.3, 0.6, 0.8, 0.9], bins=5)
    >>> ax.get_legend().get_texts()[1].get_text()
    '95% acceptance interval (calibrated)'
    """
    from bayescal import classification as clf

    _check_call("reliability_diagram", _RELIABILITY_CALLS, 2, (curve, y_prob, *args))
    if style not in ("points", "bars"):
        raise ValueError(f"style must be 'points' or 'bars'; got {style!r}.")
    if isinstance(min_count, bool) or not isinstance(min_count, int | np.integer):
        raise TypeError(f"min_count must be an int >= 0, e.g. 10; got {min_count!r}.")
    if min_count < 0:
        raise ValueError(f"min_count must be an int >= 0, e.g. 10; got {min_count}.")
    cls = _curve_type()
    computed = False
    if y_prob is not None:
        if isinstance(curve, cls):
            raise TypeError(
                "reliability_diagram got a CalibrationCurve and y_prob: pass either the "
                f"curve alone or labels and probabilities. Call {_RELIABILITY_CALLS}."
            )
        kw = {} if bins is None else {"bins": bins}
        curve = clf.reliability_curve(curve, y_prob, strategy=strategy, **kw)
        computed = True
    elif not isinstance(curve, cls):
        raise TypeError(
            f"curve must be a CalibrationCurve, or labels with y_prob; got one "
            f"{type(curve).__name__} and no y_prob. Call {_RELIABILITY_CALLS}. For PIT "
            "values call plot.calibration_curve(pit) or plot.pit_ecdf(pit, key=0)."
        )
    elif bins is not None:
        raise TypeError(
            "bins applies to labels and probabilities; a curve is already binned. Call "
            f"{_RELIABILITY_CALLS}."
        )
    if corp is not None:
        _check_curve(corp, "corp")
    level = _check_level(level)
    if intervals and curve.lower is None and getattr(curve, "edges", None) is not None:
        curve = clf.acceptance_intervals(curve, level=level)
        computed = True
    if interval_label is None:
        interval_label = (
            f"{level:.0%} acceptance interval (calibrated)"
            if computed
            else "acceptance interval"
        )
    x, y, w = _np(curve.expected), _np(curve.observed), _np(curve.weight)
    if not (x.ndim == 1 and x.shape == y.shape == w.shape):
        raise ValueError(
            "curve.expected, curve.observed and curve.weight must be 1-D of one length; "
            f"got shapes {x.shape}, {y.shape}, {w.shape}."
        )
    ax = _axes(ax, figsize=(7.0, 6.2))
    color = _color(0, color)
    k = x.size
    if edges is None and getattr(curve, "edges", None) is not None:
        edges = _np(curve.edges)
    e = _bin_edges(x, k, edges)
    filled = w > 0
    small = filled & (w < min_count)
    big = filled & ~small
    _reference_line(ax, [0, 1], [0, 1], "ideal")

    if intervals and curve.lower is not None and curve.upper is not None:
        lo, hi = _np(curve.lower), _np(curve.upper)
        ok = filled & np.isfinite(lo) & np.isfinite(hi)
        ax.vlines(
            x[ok],
            lo[ok],
            hi[ok],
            color="0.45",
            linewidth=5,
            alpha=0.35,
            label=interval_label,
            zorder=1,
        )

    name = label or "observed frequency"
    small_label = f"bin with < {min_count} cases"
    if style == "points":
        # the line joins neighbouring well-filled bins only: it breaks at small bins
        # rather than drawing a straight line across them
        order = np.argsort(np.where(filled, x, np.inf))[: int(filled.sum())]
        ax.plot(
            x[order],
            np.where(big, y, np.nan)[order],
            "-",
            color=color,
            linewidth=1.2,
            zorder=2,
        )
        ax.scatter(
            x[big],
            y[big],
            s=_marker_sizes(w)[big],
            color=color,
            edgecolor="white",
            linewidth=0.6,
            zorder=3,
            clip_on=False,
            label=f"{name} (area ~ count)",
        )
        if small.any():
            ax.scatter(
                x[small],
                y[small],
                s=_marker_sizes(w)[small],
                facecolor="none",
                edgecolor=color,
                linewidth=1.0,
                alpha=0.5,
                zorder=3,
                clip_on=False,
                label=small_label,
            )
    else:
        if e is not None:
            left, width = e[:-1], np.diff(e)
        else:
            gaps = np.diff(np.sort(x[filled])) if filled.sum() > 1 else np.array([0.1])
            width = np.full(k, 0.8 * max(gaps.min(), 1e-3))
            left = x - width / 2
        for mask, alpha, lab in ((big, 0.75, name), (small, 0.25, small_label)):
            if mask.any():
                ax.bar(
                    left[mask],
                    y[mask],
                    width=width[mask],
                    align="edge",
                    color=color,
                    alpha=alpha,
                    edgecolor="white",
                    label=lab,
                )
        ax.bar(
            left[filled],
            (x - y)[filled],
            bottom=y[filled],
            width=width[filled],
            align="edge",
            facecolor="none",
            edgecolor="C3",
            hatch="///",
            linewidth=0.8,
            label="gap to mean prediction",
        )

    if corp is not None:
        cx, cy = _np(corp.expected), _np(corp.observed)
        if corp.lower is not None and corp.upper is not None:
            ax.fill_between(
                cx,
                _np(corp.lower),
                _np(corp.upper),
                step="post",
                color="C1",
                alpha=0.2,
                linewidth=0,
                label="consistency band",
            )
        ax.step(cx, cy, where="post", color="C1", linewidth=1.5, label="CORP (PAV)")

    _unit_square(ax)
    ax.set_ylabel("observed frequency of class 1")
    _legend_right(ax)
    xlabel = "mean predicted probability (per bin)"
    if not histogram:
        ax.set_xlabel(xlabel)
        return ax

    if hist_ax is None:
        # an inset under the diagram: it follows the square axes' box, and constrained
        # layout (and bbox_inches="tight") count it as part of the axes
        hist_ax = ax.inset_axes((0.0, -0.32, 1.0, 0.27))
    counts_color = np.where(small, "0.6", color) if e is not None else None
    if e is not None:
        hist_ax.bar(
            e[:-1],
            w,
            width=np.diff(e),
            align="edge",
            color=list(counts_color),
            alpha=0.6,
            edgecolor="white",
        )
    else:
        bar_width = 0.8 * (np.diff(np.sort(x[filled])).min() if filled.sum() > 1 else 0.1)
        hist_ax.bar(x[filled], w[filled], width=bar_width, color=color, alpha=0.6)
    hist_ax.set_xlim(0.0, 1.0)
    if log_counts:
        hist_ax.set_yscale("log")
    hist_ax.set_xlabel(xlabel)
    hist_ax.set_ylabel("count")
    ax.tick_params(labelbottom=False)
    return ax


# ------------------------------------------------------------------- PIT plots


_PIT_CALLS = (
    "plot.{name}(pit, key=0) with PIT values in [0, 1], e.g. pit = "
    "bayescal.regression.pit_normal(y, loc, scale) or bayescal.numpyro.pit(y, draws); "
    "for a classifier's (y_true, y_prob) call plot.reliability_diagram(y_true, y_prob)"
)


def pit_ecdf(
    pit: Any,
    *args: Any,
    ax: Any = None,
    key: Any = None,
    band: Any = None,
    difference: bool = True,
    level: float = 0.95,
    num_points: int = 100,
    num_samples: int = 1000,
    label: str | None = None,
    color: Any = None,
) -> Any:
    """ECDF of PIT values (or its difference from the diagonal) with a simultaneous band.

    The ECDF is evaluated at ``linspace(0, 1, num_points)``; the band is the
    simultaneous ``level`` band of :func:`bayescal.regression.pit_ecdf_band` for that
    many points: under perfect calibration the whole curve stays inside it with
    probability ``level``. Points outside the band are marked.

    Parameters
    ----------
    pit : array_like, shape [N]
    *args
        Not accepted: further positional arguments raise a ``TypeError`` that names
        the call to make.
    ax : matplotlib Axes, optional
    key : PRNG key or int seed, optional
        Randomness of the band simulation. The band is drawn when a key is given (or a
        ``Band`` is passed); without one the plot shows the curve alone (bayescal never
        uses a hidden fixed key).
    band : None, bool or Band, default None
        None: a band when ``key`` is given; True: a band (needs ``key``); a ``Band`` from
        ``pit_ecdf_band(key, len(pit), ..., num_points=num_points)``: use it; False: none.
    difference : bool, default True
        Plot :math:`G_n(p) - p` (the ECDF-difference plot, whose band is much easier to
        read) instead of :math:`G_n(p)`.
    level : float in (0, 1), default 0.95
    num_points : int, default 100
    num_samples : int, default 1000
        Simulations for the band.
    label : str, optional
    color : color, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal import plot
    >>> import jax
    >>> pit = jax.random.uniform(jax.random.key(0), (200,))
    >>> ax = plot.pit_ecdf(pit, key=jax.random.key(1), num_points=50, num_samples=200)
    >>> ax.get_ylabel()
    'ECDF(p) − p'
    """
    from bayescal import regression as reg
    from bayescal.core import Band

    _check_call("pit_ecdf", _PIT_CALLS.format(name="pit_ecdf"), 1, (pit, *args))
    u = _check_pit(pit)
    level = _check_level(level)
    curve = reg.calibration_curve(u, num_levels=num_points)
    p, g = _np(curve.expected), _np(curve.observed)
    explicit_no_band = band is False
    if band is None:
        band = key is not None
    if band is True:
        if key is None:
            raise TypeError(
                "band=True simulates the band, which needs randomness: pass key (a PRNG "
                "key or an int seed), or band=False."
            )
        band = reg.pit_ecdf_band(
            key,
            u.shape[0],
            level=level,
            num_points=num_points,
            num_samples=num_samples,
        )
    elif band is False or band is None:
        band = None
    elif not isinstance(band, Band):
        raise TypeError(f"band must be True, False or a Band; got {type(band).__name__}.")
    elif np.asarray(band.x).shape != p.shape:
        raise ValueError(
            f"band has {np.asarray(band.x).size} points but num_points={num_points}; "
            "compute it with pit_ecdf_band(key, n, num_points=num_points)."
        )
    shift = p if difference else 0.0
    ax = _axes(ax, figsize=(5.6, 4.0) if difference else (6.8, 4.8))
    color = _color(0, color)
    _reference_line(ax, [0, 1], [0, 0] if difference else [0, 1], "uniform")
    if band is not None:
        lo, hi = _np(band.lower), _np(band.upper)
        ax.fill_between(
            p,
            lo - shift,
            hi - shift,
            color="0.5",
            alpha=0.25,
            linewidth=0,
            label=f"{level:.0%} simultaneous band",
        )
    ax.plot(
        p,
        g - shift,
        color=color,
        linewidth=1.6,
        label=label or f"PIT ECDF (n={u.shape[0]})",
    )
    if band is not None:
        out = (g < lo) | (g > hi)
        if out.any():
            ax.plot(
                p[out],
                (g - shift)[out],
                "o",
                color="C3",
                markersize=4,
                label="outside band",
            )
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("PIT value p")
    if difference:
        ax.set_ylabel("ECDF(p) − p")
        vals = [np.abs(g - p).max()]
        if band is not None:
            vals += [np.abs(lo - p).max(), np.abs(hi - p).max()]
        lim = 1.15 * max(max(vals), 1e-3)
        if getattr(ax, "_bayescal_pit_ecdf_lim", 0.0) > lim:
            lim = ax._bayescal_pit_ecdf_lim  # an earlier curve on these axes needs more
        ax._bayescal_pit_ecdf_lim = lim
        ax.set_ylim(-lim, lim)
        _legend_below(ax, ncols=2)
    else:
        ax.set_ylabel("ECDF(p)")
        _unit_square(ax)
        _legend_right(ax)
    if band is None and not explicit_no_band:
        # say why there is no band, so that wiggles are not read against nothing
        ax.get_legend().set_title("no band: pass key= to draw it", prop={"size": "small"})
    return ax


def pit_histogram(
    pit: Any,
    *args: Any,
    bins: Any = 10,
    ax: Any = None,
    level: float = 0.95,
    band: bool = True,
    label: str | None = None,
    color: Any = None,
) -> Any:
    """Histogram of PIT values on the density scale, with the uniform line and band.

    The band is the pointwise binomial acceptance interval of each bar under perfect
    calibration: a bin of width ``h`` holds :math:`\\mathrm{Bin}(n, h)` values, so its
    density lies in :math:`[Q(\\alpha/2), Q(1-\\alpha/2)] / (n h)` with probability
    at least ``level`` (per bin, not simultaneously). The band is drawn behind the
    bars, and bars outside it are outlined in red and hatched (their number in the
    legend).

    Parameters
    ----------
    pit : array_like, shape [N]
    *args
        Not accepted: further positional arguments raise a ``TypeError`` that names
        the call to make.
    bins : int or array_like of edges in [0, 1], default 10
    ax : matplotlib Axes, optional
    level : float in (0, 1), default 0.95
    band : bool, default True
    label : str, optional
    color : color, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal import plot
    >>> ax = plot.pit_histogram([0.1, 0.3, 0.35, 0.6, 0.8], bins=5)
    >>> len(ax.patches)
    5
    """
    from scipy.stats import binom

    calls = _PIT_CALLS.format(name="pit_histogram").replace("key=0", "bins=10")
    _check_call("pit_histogram", calls, 1, (pit, *args))
    u = np.asarray(_check_pit(pit), dtype=float)
    level = _check_level(level)
    if isinstance(bins, bool):
        raise TypeError("bins must be an int >= 1 or an array of edges; got a bool.")
    if isinstance(bins, int | np.integer):
        if bins < 1:
            raise ValueError(f"bins must be an int >= 1 or an array of edges; got {bins}.")
        edges = np.linspace(0.0, 1.0, int(bins) + 1)
    else:
        edges = np.asarray(bins, dtype=float)
        if (
            edges.ndim != 1
            or edges.size < 2
            or np.any(np.diff(edges) <= 0)
            or edges[0] < 0
            or edges[-1] > 1
        ):
            raise ValueError(
                "bins must be an int >= 1 or strictly increasing edges within [0, 1]; "
                f"got {edges!r}."
            )
    n = u.size
    counts, _ = np.histogram(u, bins=edges)
    # np.histogram closes the last bin on the right; a value exactly at an inner edge
    # goes to the bin on its right, as for the uniform bins of the band.
    width = np.diff(edges)
    density = counts / (n * width)
    ax = _axes(ax, figsize=(5.6, 4.0))
    color = _color(0, color)
    outside = np.zeros(counts.shape, dtype=bool)
    if band:  # drawn first, behind the bars: every bar top reads against it
        q = (1 - level) / 2
        lo = binom.ppf(q, n, width) / (n * width)
        hi = binom.ppf(1 - q, n, width) / (n * width)
        outside = (density < lo) | (density > hi)
        ax.fill_between(
            edges,
            np.append(lo, lo[-1]),
            np.append(hi, hi[-1]),
            step="post",
            color="0.3",
            alpha=0.22,
            linewidth=0,
            zorder=1,
            label=f"{level:.0%} binomial band (per bin)",
        )
    ax.bar(
        edges[:-1][~outside],
        density[~outside],
        width=width[~outside],
        align="edge",
        color=color,
        alpha=0.6,
        edgecolor="white",
        zorder=2,
        label=label or f"PIT (n={n})",
    )
    if outside.any():
        ax.bar(
            edges[:-1][outside],
            density[outside],
            width=width[outside],
            align="edge",
            color=color,
            alpha=0.6,
            edgecolor="C3",
            linewidth=1.6,
            hatch="xx",
            zorder=2,
            label=f"outside the band ({int(outside.sum())} of {outside.size} bins)",
        )
    ax.axhline(1.0, label="uniform", zorder=3, **_DIAGONAL)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.15 * max(density.max(), hi.max() if band else 1.0, 1.0))
    ax.set_xlabel("PIT value")
    ax.set_ylabel("density (uniform = 1)")
    _legend_below(ax, ncols=2)
    return ax


# -------------------------------------------------------------------- sharpness


def sharpness(
    scale: Any,
    *,
    ax: Any = None,
    bins: Any = "auto",
    label: str | None = None,
    color: Any = None,
) -> Any:
    """Distribution of the predictive standard deviations, with their mean and RMS.

    The RMS, :math:`\\sqrt{\\frac1N \\sum_i \\sigma_i^2}`, is
    ``bayescal.regression.sharpness(scale, root=True)`` (uncertainty-toolbox's
    sharpness); smaller is sharper, to be compared between calibrated models.

    Parameters
    ----------
    scale : array_like, shape [N]
        Predictive standard deviations (> 0).
    ax : matplotlib Axes, optional
    bins : int, sequence or str, default "auto"
        Passed to :func:`numpy.histogram`.
    label : str, optional
    color : color, optional

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal import plot
    >>> ax = plot.sharpness([0.5, 1.0, 1.5, 1.0])
    >>> ax.get_xlabel()
    'predictive standard deviation'
    """
    s = _host_array(scale, "scale", "scales")
    if np.any(s <= 0):
        raise ValueError(
            f"scale must be strictly positive; got {int((s <= 0).sum())} values <= 0 (min "
            f"{s.min()!r}). A predictive scale is a standard deviation > 0."
        )
    mean, rms = float(s.mean()), float(np.sqrt(np.mean(s**2)))
    ax = _axes(ax, figsize=(5.6, 4.0))
    color = _color(0, color)
    ax.hist(
        s,
        bins=bins,
        color=color,
        alpha=0.7,
        edgecolor="white",
        label=label or f"n={s.size}",
    )
    ax.axvline(
        mean, color="0.2", linestyle="--", linewidth=1.2, label=f"mean σ = {mean:.3g}"
    )
    ax.axvline(
        rms,
        color="C3",
        linestyle="-",
        linewidth=1.2,
        label=f"RMS σ (sharpness) = {rms:.3g}",
    )
    ax.set_xlabel("predictive standard deviation")
    ax.set_ylabel("count")
    ax.set_xlim(left=0.0)
    _legend_below(ax, ncols=3)
    return ax


# ------------------------------------------------------------------- smooth reliability


def smooth_reliability_diagram(
    y_true: Any,
    y_prob: Any,
    *,
    ax: Any = None,
    key: Any = None,
    bandwidth: float | None = None,
    num_samples: int = 200,
    level: float = 0.95,
    density: bool = True,
    label: str | None = None,
    color: Any = None,
    **kwargs: Any,
) -> Any:
    """Smoothed reliability diagram (Blasiok & Nakkiran, 2023), as relplot draws it.

    The kernel-smoothed frequency of positives against the predicted probability
    (:func:`bayescal.classification.smooth_reliability_curve`, at the smooth-ECE
    bandwidth), the diagonal, a pointwise bootstrap band when a ``key`` is given
    (:func:`bayescal.classification.smooth_reliability_band`), the density of the
    predictions as a shaded profile at the bottom, and the smooth ECE in the legend.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels 0/1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1.
    ax : matplotlib Axes, optional
    key : PRNG key or int, optional
        Draw the bootstrap band with this randomness; ``None`` (default): no band.
    bandwidth : float in (0, 1], optional
        Kernel standard deviation; default the smooth-ECE fixed point.
    num_samples : int, default 200
        Bootstrap resamples for the band.
    level : float, default 0.95
        Pointwise level of the band.
    density : bool, default True
        Shade the kernel density of the predictions along the bottom.
    label : str, optional
        Legend label of the curve (default ``"smoothed (smECE = ...)"``).
    color : matplotlib color, optional
    **kwargs
        Passed to ``ax.plot`` for the curve.

    Returns
    -------
    matplotlib Axes

    See Also
    --------
    reliability_diagram : The binned diagram.
    bayescal.classification.smooth_calibration_error : The number in the legend.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from bayescal import plot
    >>> ax = plot.smooth_reliability_diagram([0, 1, 1, 0, 1], [0.1, 0.8, 0.6, 0.3, 0.9])
    >>> ax.get_ylabel()
    'observed frequency'
    """
    from bayescal import classification as _clf

    ax = _axes(ax, figsize=(7.0, 4.8))
    error, sigma = _clf.smooth_calibration_error(
        y_true, y_prob, bandwidth=bandwidth, return_bandwidth=True
    )
    if key is not None:
        curve = _clf.smooth_reliability_band(
            key, y_true, y_prob, bandwidth=sigma, num_samples=num_samples, level=level
        )
    else:
        curve = _clf.smooth_reliability_curve(y_true, y_prob, bandwidth=sigma)
    t, mu, dens = _np(curve.expected), _np(curve.observed), _np(curve.weight)
    color = _color(0, color)
    _reference_line(ax, [0, 1], [0, 1], "ideal")
    if curve.lower is not None and curve.upper is not None:
        ax.fill_between(
            t,
            _np(curve.lower),
            _np(curve.upper),
            color=color,
            alpha=0.2,
            linewidth=0,
            label=f"{level:.0%} bootstrap band",
        )
    name = label or f"smoothed (smECE = {float(error):.3f})"
    ax.plot(t, mu, color=color, linewidth=2, label=name, **kwargs)
    if density:
        # the density profile, scaled to a tenth of the panel's height
        profile = 0.1 * dens / max(float(np.max(dens)), np.finfo(float).tiny)
        ax.fill_between(t, 0, profile, color="0.5", alpha=0.3, linewidth=0,
                        label="density of predictions")
    _unit_square(ax)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    _legend_right(ax)
    return ax
