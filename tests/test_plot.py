"""Every plot function draws the expected artists (no image comparisons)."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection, PolyCollection  # noqa: E402
from scipy import stats  # noqa: E402

from bayescal import core, plot  # noqa: E402
from bayescal import regression as reg  # noqa: E402
from bayescal.core import CalibrationCurve  # noqa: E402
from tests import _kernels as kernels


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def pits():
    r = np.random.default_rng(0)
    u = r.uniform(size=200)
    narrow = np.asarray(jax.scipy.stats.norm.cdf(2 * jax.scipy.stats.norm.ppf(u)))
    return {"calibrated": u, "too narrow": np.clip(narrow, 0, 1)}


@pytest.fixture(scope="module")
def band200():
    return reg.pit_ecdf_band(0, 200, num_points=50, num_samples=200)


@pytest.fixture(scope="module")
def binned():
    """A 10-bin reliability curve with acceptance intervals, and a CORP curve."""
    r = np.random.default_rng(1)
    p = r.beta(2, 3, 500)
    y = (r.uniform(size=500) < p**1.3).astype(float)
    edges = np.linspace(0, 1, 11)
    idx = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, 9)
    cnt = np.bincount(idx, minlength=10)
    mean_p = np.bincount(idx, weights=p, minlength=10) / np.maximum(cnt, 1)
    freq = np.bincount(idx, weights=y, minlength=10) / np.maximum(cnt, 1)
    band = kernels.binomial_acceptance_intervals(mean_p, cnt)
    curve = CalibrationCurve(
        jnp.asarray(mean_p), jnp.asarray(freq), jnp.asarray(cnt), band.lower, band.upper
    )
    order = np.argsort(p)
    fit = core.isotonic_regression(y[order])
    cb = kernels.corp_consistency_band(jax.random.key(0), p, num_samples=50)
    corp = CalibrationCurve(cb.x, fit, jnp.ones(500), cb.lower, cb.upper)
    return curve, corp, cnt


def _legend_texts(ax):
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def _polys(ax):
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_calibration_curve_single_with_band_and_area(pits):
    c = reg.bootstrap_calibration_curve(
        jax.random.key(0), pits["too narrow"], num_levels=50
    )
    ax = plot.calibration_curve(c, band_label="95% bootstrap band", kind="quantile")
    assert len(ax.lines) == 2  # diagonal and curve
    np.testing.assert_allclose(ax.lines[1].get_xydata()[:, 1], c.observed)
    assert len(_polys(ax)) == 2  # band and shaded area
    texts = _legend_texts(ax)
    area = float(reg.miscalibration_area(pits["too narrow"], num_levels=50))
    assert texts == [
        "ideal",
        "95% bootstrap band",
        f"miscalibration area (quantile) = {area:.3f}",
        "observed",
    ]
    assert ax.get_xlabel().startswith("expected proportion (quantile level")
    assert ax.get_ylabel().startswith("observed proportion")
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    assert ax.get_aspect() == 1.0
    # no band and no shading: only lines
    ax = plot.calibration_curve(c, band=False, shade_area=False)
    assert len(_polys(ax)) == 0 and ax.get_xlabel() == "expected proportion"


def test_calibration_curve_several_models_share_one_band(pits, band200):
    curves = {
        name: reg.calibration_curve(u, num_levels=50)._replace(
            lower=band200.lower, upper=band200.upper
        )
        for name, u in pits.items()
    }
    fig, ax = plt.subplots()
    out = plot.calibration_curve(curves, ax=ax, band_label="95% band under calibration")
    assert out is ax
    assert len(ax.lines) == 3
    assert len(_polys(ax)) == 1 + 2  # one shared band, two shaded areas
    texts = _legend_texts(ax)
    assert texts[:2] == ["ideal", "95% band under calibration"]
    assert texts[2].startswith("calibrated: area = ") and texts[3].startswith(
        "too narrow: area = "
    )
    # different bands are drawn per model, with explicit labels
    c2 = [
        reg.bootstrap_calibration_curve(jax.random.key(1), u, num_levels=50)
        for u in pits.values()
    ]
    ax = plot.calibration_curve(c2, labels=["A", "B"], shade_area=False, kind="interval")
    assert len(_polys(ax)) == 2
    assert _legend_texts(ax) == [
        "ideal",
        "A: band",
        f"A: area (interval) = {float(core.curve_area(c2[0])):.3f}",
        "B: band",
        f"B: area (interval) = {float(core.curve_area(c2[1])):.3f}",
    ]
    assert "central interval" in ax.get_xlabel()


def test_reliability_diagram_points_with_intervals_histogram_and_corp(binned):
    curve, corp, cnt = binned
    ax = plot.reliability_diagram(curve, corp=corp)
    assert len(ax.child_axes) == 1  # the histogram, an inset under the diagram
    hist = ax.child_axes[0]
    heights = [p.get_height() for p in hist.patches]
    np.testing.assert_array_equal(heights, cnt)  # one bar per bin, at its count
    assert hist.get_xlabel() == "mean predicted probability (per bin)"
    assert hist.get_ylabel() == "count"
    assert ax.get_ylabel() == "observed frequency of class 1"
    assert [type(c) for c in ax.collections].count(LineCollection) == 1  # intervals
    assert len(_polys(ax)) == 1  # consistency band
    small = ["bin with < 10 cases"] if ((cnt > 0) & (cnt < 10)).any() else []
    assert _legend_texts(ax) == [
        "ideal",
        "acceptance interval",
        "observed frequency (area ~ count)",
        *small,
        "consistency band",
        "CORP (PAV)",
    ]
    segs = ax.collections[0].get_segments()
    filled = cnt > 0
    assert len(segs) == filled.sum()
    np.testing.assert_allclose([s[0][1] for s in segs], np.asarray(curve.lower)[filled])
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)


def test_reliability_diagram_bars_without_histogram(binned):
    curve, _, cnt = binned
    ax = plot.reliability_diagram(curve, style="bars", histogram=False, intervals=False)
    assert len(ax.figure.axes) == 1
    filled = int((cnt > 0).sum())
    assert len(ax.patches) == 2 * filled  # observed bars and gap bars
    assert ax.get_xlabel() == "mean predicted probability (per bin)"
    assert not [c for c in ax.collections if isinstance(c, LineCollection)]
    small = ["bin with < 10 cases"] if ((cnt > 0) & (cnt < 10)).any() else []
    assert _legend_texts(ax) == [
        "ideal",
        "observed frequency",
        *small,
        "gap to mean prediction",
    ]
    # quantile-style bins: means outside the uniform bins -> bars centred on the means
    c = CalibrationCurve(
        jnp.array([0.05, 0.08, 0.5]), jnp.array([0.1, 0.1, 0.4]), jnp.array([5, 5, 5])
    )
    fig, (a1, a2) = plt.subplots(2)
    out = plot.reliability_diagram(c, ax=a1, hist_ax=a2, style="bars")
    assert out is a1 and len(a2.patches) == 3
    xs = sorted(p.get_x() + p.get_width() / 2 for p in a2.patches)
    np.testing.assert_allclose(xs, [0.05, 0.08, 0.5], atol=1e-9)


def test_pit_ecdf_difference_band_and_points_outside(pits, band200):
    ax = plot.pit_ecdf(pits["too narrow"], num_points=50, num_samples=200, key=0)
    assert ax.get_ylabel() == "ECDF(p) − p" and ax.get_xlabel() == "PIT value p"
    assert len(_polys(ax)) == 1
    texts = _legend_texts(ax)
    assert texts == ["uniform", "95% simultaneous band", "PIT ECDF (n=200)", "outside band"]
    lo, hi = ax.get_ylim()
    assert lo == -hi and ax.get_xlim() == (0.0, 1.0)
    # the band drawn is pit_ecdf_band's, shifted by the diagonal
    verts = _polys(ax)[0].get_paths()[0].vertices
    assert np.abs(verts[:, 1]).max() == pytest.approx(
        float(np.max(np.abs(np.asarray(band200.upper) - np.asarray(band200.x)))), rel=1e-5
    )
    # a calibrated sample: no point outside; a precomputed band; the plain ECDF
    ax = plot.pit_ecdf(pits["calibrated"], band=band200, num_points=50, difference=False)
    assert "outside band" not in _legend_texts(ax)
    assert ax.get_ylabel() == "ECDF(p)" and ax.get_aspect() == 1.0
    ax = plot.pit_ecdf(pits["calibrated"], band=False, num_points=50)
    assert len(_polys(ax)) == 0


def test_pit_ecdf_overlays_keep_every_curve_in_view(pits):
    # a second, better calibrated curve on the same axes must not clip the first
    # (each call used to set the limits from its own curve; found in tutorial 4)
    fig, ax = plt.subplots()
    plot.pit_ecdf(pits["too narrow"], ax=ax, band=False, num_points=50)
    first = max(abs(v) for v in ax.get_ylim())
    plot.pit_ecdf(pits["calibrated"], ax=ax, band=False, num_points=50)
    lo, hi = ax.get_ylim()
    assert lo == -hi and hi == first
    for line in ax.get_lines():
        y = np.asarray(line.get_ydata(), float)
        assert (np.abs(y) <= hi).all()
    # the other order: the second call widens the limits
    fig, ax = plt.subplots()
    plot.pit_ecdf(pits["calibrated"], ax=ax, band=False, num_points=50)
    plot.pit_ecdf(pits["too narrow"], ax=ax, band=False, num_points=50)
    assert max(abs(v) for v in ax.get_ylim()) == first


def test_pit_histogram_and_sharpness(pits):
    u = pits["too narrow"]
    ax = plot.pit_histogram(u, bins=10, level=0.9)
    assert len(ax.patches) == 10
    counts, _ = np.histogram(u, bins=10, range=(0, 1))
    bars = sorted(ax.patches, key=lambda p: p.get_x())
    np.testing.assert_allclose([p.get_height() for p in bars], counts / 20)
    assert len(_polys(ax)) == 1
    # reference: scipy.stats.binom quantiles of Binomial(200, 0.1), per bin
    lo, hi = stats.binom.ppf([0.05, 0.95], 200, 0.1)
    n_out = int(((counts < lo) | (counts > hi)).sum())
    assert n_out > 0  # the too-narrow model's U shape leaves the band
    assert sorted(_legend_texts(ax)) == sorted(
        [
            "90% binomial band (per bin)",
            "PIT (n=200)",
            f"outside the band ({n_out} of 10 bins)",
            "uniform",
        ]
    )
    assert ax.get_ylabel() == "density (uniform = 1)" and ax.get_xlim() == (0.0, 1.0)
    ax = plot.pit_histogram(u, bins=[0, 0.5, 0.9, 1.0], band=False)
    assert len(ax.patches) == 3 and len(_polys(ax)) == 0

    scale = np.random.default_rng(2).uniform(0.5, 1.5, 300)
    ax = plot.sharpness(scale, bins=12)
    assert len(ax.patches) == 12
    mean, rms = scale.mean(), np.sqrt(np.mean(scale**2))
    assert _legend_texts(ax) == [
        "n=300",
        f"mean σ = {mean:.3g}",
        f"RMS σ (sharpness) = {rms:.3g}",
    ]
    assert ax.lines[0].get_xdata()[0] == pytest.approx(mean)
    assert ax.lines[1].get_xdata()[0] == pytest.approx(
        float(reg.sharpness(scale, root=True))
    )
    assert ax.get_xlabel() == "predictive standard deviation"


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: plot.calibration_curve([1, 2]), ValueError, "pit must lie in"),
        (
            lambda: plot.calibration_curve(np.full((2, 3), 0.5)),
            TypeError,
            "must be a CalibrationCurve, a 1-D array of PIT values",
        ),
        (lambda: plot.calibration_curve([]), ValueError, "curve_or_curves is empty"),
        (lambda: plot.calibration_curve(3.0), TypeError, "curve_or_curves must be"),
        (
            lambda: plot.calibration_curve(reg.calibration_curve([0.5]), labels=["a", "b"]),
            ValueError,
            "labels has 2 entries",
        ),
        (
            lambda: plot.calibration_curve(reg.calibration_curve([0.5]), kind="both"),
            ValueError,
            "kind must be None",
        ),
        (
            lambda: plot.calibration_curve(reg.calibration_curve([0.5]), ax="ax"),
            TypeError,
            "ax must be a matplotlib Axes",
        ),
        (
            lambda: plot.reliability_diagram(reg.calibration_curve([0.5]), style="line"),
            ValueError,
            "style must be",
        ),
        (
            lambda: plot.reliability_diagram(
                reg.calibration_curve([0.5], num_levels=3), edges=[0, 1]
            ),
            ValueError,
            "edges must be 4",
        ),
        (
            lambda: plot.pit_ecdf([0.5, 1.5], key=0),
            ValueError,
            "pit must lie in \\[0, 1\\]",
        ),
        (
            lambda: plot.pit_ecdf([0.5], level=2, key=0),
            ValueError,
            "level must lie strictly",
        ),
        (
            lambda: plot.pit_ecdf([0.5], band="yes"),
            TypeError,
            "band must be True, False or a Band",
        ),
        (
            lambda: plot.pit_ecdf(
                [0.5], band=reg.pit_ecdf_band(0, 1, num_points=5, num_samples=10)
            ),
            ValueError,
            "band has 5 points",
        ),
        (lambda: plot.pit_histogram([0.5], bins=0), ValueError, "bins must be an int >= 1"),
        (
            lambda: plot.pit_histogram([0.5], bins=[0.5, 0.2]),
            ValueError,
            "strictly increasing",
        ),
        (
            lambda: plot.sharpness([1.0, -1.0]),
            ValueError,
            "scale must be strictly positive",
        ),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_missing_matplotlib_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot.sharpness([1.0])


def test_importing_the_module_does_not_import_matplotlib():
    code = "import sys, bayescal.plot; print('matplotlib' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_reference_line_drawn_once_per_axes():
    import matplotlib.pyplot as plt

    from bayescal import classification as clf
    from bayescal import plot

    rng = np.random.default_rng(0)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(int)
    fig, ax = plt.subplots()
    for q in (p, p**2):
        plot.reliability_diagram(clf.reliability_curve(y, q), ax=ax, histogram=False)
    plot.pit_ecdf(p, ax=(ax2 := fig.add_subplot(2, 1, 2)), band=False)
    plot.pit_ecdf(p**2, ax=ax2, band=False)
    assert [line.get_label() for line in ax.get_lines()].count("ideal") == 1
    assert [line.get_label() for line in ax2.get_lines()].count("uniform") == 1
    plt.close(fig)


# ----------------------------------------------- issue 21: raw arrays, honest pictures


@pytest.fixture(scope="module")
def classifier():
    """An overconfident classifier: few cases in the middle bins."""
    r = np.random.default_rng(3)
    z = r.normal(0.0, 1.5, 400)
    y = (r.uniform(size=400) < 1 / (1 + np.exp(-z))).astype(np.int32)
    p = (1 / (1 + np.exp(-6.0 * z))).astype(np.float32)
    return y, p


def _bbox(artist, fig):
    return artist.get_window_extent(fig.canvas.get_renderer())


def _points(ax):
    """Offsets and sizes of the scatter markers of a reliability diagram."""
    from matplotlib.collections import PathCollection

    cols = [c for c in ax.collections if isinstance(c, PathCollection)]
    return cols


def test_reliability_diagram_raw_arrays_equal_the_curve_call(classifier):
    from bayescal import classification as clf

    y, p = classifier
    a = plot.reliability_diagram(y, p, bins=10)
    b = plot.reliability_diagram(
        clf.acceptance_intervals(clf.reliability_curve(y, p, bins=10))
    )
    for pa, pb in zip(_points(a), _points(b), strict=True):
        np.testing.assert_array_equal(pa.get_offsets(), pb.get_offsets())
        np.testing.assert_array_equal(pa.get_sizes(), pb.get_sizes())
    seg_a, seg_b = a.collections[0].get_segments(), b.collections[0].get_segments()
    np.testing.assert_array_equal(np.array(seg_a), np.array(seg_b))
    ha = [r.get_height() for r in a.child_axes[0].patches]
    hb = [r.get_height() for r in b.child_axes[0].patches]
    assert ha == hb
    # the counts are numpy's histogram of the probabilities (reference: numpy)
    np.testing.assert_array_equal(ha, np.histogram(p, bins=10, range=(0, 1))[0])
    # a bare binned curve gets the same intervals (it has edges)
    c = plot.reliability_diagram(clf.reliability_curve(y, p, bins=10))
    np.testing.assert_array_equal(np.array(c.collections[0].get_segments()), seg_a)
    assert _legend_texts(a)[1] == "95% acceptance interval (calibrated)"


def test_reliability_diagram_small_bins_are_smaller_and_faded(classifier):
    y, p = classifier
    ax = plot.reliability_diagram(y, p, bins=10, min_count=10)
    big, small = _points(ax)
    cnt = np.histogram(p, bins=10, range=(0, 1))[0]
    assert len(small.get_offsets()) == int(((cnt > 0) & (cnt < 10)).sum()) > 0
    assert small.get_sizes().max() < big.get_sizes().min()
    assert small.get_alpha() < 1.0 and big.get_alpha() is None
    assert small.get_label() == "bin with < 10 cases"
    # the connecting line breaks (NaN) at the small bins, joins the others
    xy = ax.lines[1].get_xydata()
    np.testing.assert_array_equal(xy[np.isfinite(xy[:, 1])], big.get_offsets())
    np.testing.assert_array_equal(
        np.sort(xy[np.isnan(xy[:, 1]), 0]), np.sort(small.get_offsets()[:, 0])
    )
    # bars: small bins fainter
    ax = plot.reliability_diagram(y, p, bins=10, style="bars", histogram=False)
    alphas = {c.get_label(): c.patches[0].get_alpha() for c in ax.containers[:2]}
    assert alphas["bin with < 10 cases"] < alphas["observed frequency"]


def test_legends_never_cover_the_data(classifier, pits):
    y, p = classifier
    fig, axes = plt.subplots(1, 3, figsize=(18, 6), layout="constrained")
    plot.reliability_diagram(y, p, bins=10, ax=axes[0])
    plot.calibration_curve(pits, key=0, ax=axes[1], num_levels=50, num_samples=200)
    plot.smooth_reliability_diagram(y, p, ax=axes[2])
    fig.canvas.draw()
    for ax in axes:
        legend = _bbox(ax.get_legend(), fig)
        assert not legend.overlaps(_bbox(ax, fig))  # outside the axes, so off the data
    # nor over any acceptance bar (the bars' extent, in display coordinates)
    segs = np.concatenate(axes[0].collections[0].get_segments())
    corners = axes[0].transData.transform(segs)
    bars = matplotlib.transforms.Bbox([corners.min(0), corners.max(0)])
    assert len(segs) > 0
    for ax in axes:
        assert not _bbox(ax.get_legend(), fig).overlaps(bars)
    # below-the-axes legends of the PIT plots
    for ax in (
        plot.pit_histogram(pits["too narrow"]),
        plot.pit_ecdf(pits["too narrow"], key=0, num_points=50, num_samples=200),
    ):
        ax.figure.canvas.draw()
        assert not _bbox(ax.get_legend(), ax.figure).overlaps(_bbox(ax, ax.figure))


def test_calibration_curve_takes_pit_values(pits):
    u = pits["too narrow"]
    a = plot.calibration_curve(u, kind="interval", num_levels=50)
    ref = reg.calibration_curve(u, num_levels=50, kind="interval")
    np.testing.assert_array_equal(a.lines[1].get_xydata()[:, 1], np.asarray(ref.observed))
    # the legend's area is the exact one a table reports (miscalibration_area, same kind)
    area = float(reg.miscalibration_area(u, kind="interval"))
    assert f"miscalibration area (interval) = {area:.3f}" in _legend_texts(a)
    assert "central interval" in a.get_xlabel()
    # with a key: the simultaneous band under calibration, pit_ecdf_band's values
    b = plot.calibration_curve(u, key=1, num_levels=50, num_samples=200)
    band = reg.pit_ecdf_band(1, u.size, num_points=50, num_samples=200)
    poly = _polys(b)[0].get_paths()[0].vertices
    np.testing.assert_allclose(poly[:, 1].max(), float(np.max(band.upper)), rtol=1e-6)
    assert _legend_texts(b)[1] == "95% simultaneous band under calibration (n=200)"
    assert "quantile level" in b.get_xlabel()
    # several models on the same n share one band; a sequence of PIT arrays works too
    c = plot.calibration_curve(pits, key=1, num_levels=50, num_samples=200)
    assert len(_polys(c)) == 1 + 2
    d = plot.calibration_curve(list(pits.values()), num_levels=50)
    assert [t.split(":")[0] for t in _legend_texts(d)[1:]] == ["model 1", "model 2"]


def test_wrong_calls_name_the_right_call(classifier, pits):
    y, p = classifier
    with pytest.raises(TypeError, match=r"plot\.reliability_diagram\(y_true, y_prob"):
        plot.calibration_curve(y, p)
    with pytest.raises(TypeError, match=r"reliability_diagram\(y_true, y_prob, bins=10\)"):
        plot.reliability_diagram(y)
    with pytest.raises(TypeError, match="calibration_curve\\(pit\\)"):
        plot.reliability_diagram(pits["calibrated"])
    with pytest.raises(TypeError, match="at most 2 positional"):
        plot.reliability_diagram(y, p, 10)
    with pytest.raises(TypeError, match="bins applies to labels"):
        plot.reliability_diagram(reg.calibration_curve([0.5]), bins=10)
    with pytest.raises(TypeError, match=r"pit_normal\(y, loc, scale\)"):
        plot.pit_ecdf(y, p, p)
    with pytest.raises(TypeError, match=r"plot\.pit_histogram\(pit, bins=10\)"):
        plot.pit_histogram(y, p)
    with pytest.raises(ValueError, match="min_count"):
        plot.reliability_diagram(y, p, min_count=-1)


def test_pit_histogram_band_behind_bars_and_bins_outside_marked(pits):
    u = pits["too narrow"]
    ax = plot.pit_histogram(u, bins=10)
    band = _polys(ax)[0]
    assert all(band.get_zorder() < r.get_zorder() for r in ax.patches)
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    lo, hi = stats.binom.ppf([0.025, 0.975], 200, 0.1)  # reference: scipy.stats.binom
    outside = (counts < lo) | (counts > hi)
    marked = sorted(
        round(r.get_x(), 6) for r in ax.patches if r.get_hatch() == "xx"
    )
    assert marked == [round(x, 6) for x in np.linspace(0, 0.9, 10)[outside]]
    red = matplotlib.colors.to_rgb("C3")
    assert all(
        np.allclose(r.get_edgecolor()[:3], red) for r in ax.patches if r.get_hatch()
    )
    # a calibrated sample of this size: no bin marked
    ax = plot.pit_histogram(np.linspace(0.0025, 0.9975, 200), bins=10)
    assert not [r for r in ax.patches if r.get_hatch()]


def test_pit_ecdf_without_a_key_says_there_is_no_band(pits):
    ax = plot.pit_ecdf(pits["calibrated"], num_points=50)
    assert ax.get_legend().get_title().get_text() == "no band: pass key= to draw it"
    ax = plot.pit_ecdf(pits["calibrated"], num_points=50, band=False)
    assert ax.get_legend().get_title().get_text() == ""


def test_a_wide_legend_goes_under_a_small_figure_instead_of_squeezing_the_square():
    # issue 37: at figsize=(7, 5) four long labels put the legend right of the axes and
    # left the unit square ~40% of the figure's width and ~56% of its height. Now the
    # legend goes under the axes and the square keeps more of its slot.
    rng = np.random.default_rng(0)
    pits = {f"model {i}: a longer name": rng.uniform(size=300) ** (1 + 0.2 * i)
            for i in range(4)}
    for figsize in [(7, 5), (6.4, 4.8)]:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
        plot.calibration_curve(pits, ax=ax, num_samples=100, key=0)
        fig.canvas.draw()
        legend, axes = _bbox(ax.get_legend(), fig), _bbox(ax, fig)
        assert legend.y1 < axes.y0  # under the axes, not beside them
        pos = ax.get_position()
        assert pos.width * pos.height > 0.26  # was 0.22 at (7, 5), 0.16 at (6.4, 4.8)
        plt.close(fig)
    # where the slot has room beside the square, the legend still sits on the right
    fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")
    plot.calibration_curve({"a": pits["model 0: a longer name"]}, ax=ax, num_samples=100,
                           key=0)
    fig.canvas.draw()
    assert _bbox(ax.get_legend(), fig).x0 > _bbox(ax, fig).x1
    plt.close(fig)
