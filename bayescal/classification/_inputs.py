"""Input handling shared by the classification functions (private).

Everything goes through :mod:`bayescal._src.validation`: shapes and dtypes are always
checked, values only when concrete (so the public functions still trace under
``jax.jit`` and ``jax.vmap``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import validation as _v
from bayescal._src import xla_options
from bayescal._src.binned import freedman_diaconis_edges
from bayescal._src.reduce import check_weights

STRATEGIES = ("uniform", "quantile")

#: The multiclass programs (probabilities ``[N, C]``) skip LLVM's optimisations up to
#: this many values (xla_options' limit was measured on ``[N]`` fits): at N = 1e4 and
#: C = 5 the first call of top_label_calibration_error takes ~0.3 instead of ~0.75 s
#: of CPU, marginal_calibration_error ~0.3 instead of ~0.7 s, for runs of 2.5 and
#: 9 instead of 0.7 and 2 ms (measured on the 2-core CPU machines).
MULTICLASS_QUICK_COMPILE_MAX_SIZE = 1 << 17


def quick_compiler_options(size: int) -> dict[str, Any]:
    """``xla_options.compiler_options`` up to its quick size, XLA's defaults beyond.

    For the programs whose large runs were slower with the older emitters (the smooth
    ECE's search and curve 2-3x at N = 1e6; CORP and histogram binning the same either
    way): the options' compile-time gain is for small N.
    """
    return xla_options.compiler_options(size, large=False)


def isotonic_fit_compiler_options(size: int) -> dict[str, Any]:
    """The isotonic fits' programs (``fit_isotonic``, ``fit_centered_isotonic``,
    ``fit_venn_abers``): quick compiles up to ``xla_options.FIT_QUICK_COMPILE_MAX_SIZE``
    (a fit is usually called once), XLA's defaults beyond."""
    return xla_options.fit_compiler_options(size, large=False)


#: The nonparametric one-vs-rest fits (all classes in one program) compile quickly up
#: to this many values ``N x C`` (padded: N up to ~200,000 with 5 classes): at
#: N = 1e5 and C = 5 the first call of ``fit_one_vs_rest`` (isotonic) went from 0.84 to
#: 0.48-0.54 s, its warm call 78 -> 55-70 ms (fresh processes, 2026-11-29).
MULTICLASS_FIT_QUICK_COMPILE_MAX_SIZE = 1 << 20


def multiclass_fit_compiler_options(size: int) -> dict[str, Any]:
    """Quick compiles up to :data:`MULTICLASS_FIT_QUICK_COMPILE_MAX_SIZE`, XLA's
    defaults beyond (the one-vs-rest fits)."""
    return xla_options.compiler_options(size, MULTICLASS_FIT_QUICK_COMPILE_MAX_SIZE, large=False)


def multiclass_compiler_options(size: int, *, large: bool = False) -> dict[str, Any]:
    """:func:`quick_compiler_options` up to :data:`MULTICLASS_QUICK_COMPILE_MAX_SIZE`
    (isotonic one-vs-rest ran 1.8x, histogram one-vs-rest 1.6x slower at N = 1e6 with
    the older emitters; ``large=True``: xla_options' options beyond it)."""
    return xla_options.compiler_options(size, MULTICLASS_QUICK_COMPILE_MAX_SIZE, large=large)


def binary_inputs(
    y_true: Any, y_prob: Any, *, prob_name: str = "y_prob", probabilities: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Validate 1-D binary labels and matching predictions; labels get ``y_prob``'s dtype.

    ``probabilities=False`` accepts any finite real scores (logits, margins).
    """
    p = _v.as_float_array(y_prob, prob_name)
    _v.check_ndim(p, prob_name, 1)
    _v.check_nonempty(p, prob_name)
    y = _v.as_float_array(y_true, "y_true")
    _v.check_ndim(y, "y_true", 1)
    _v.check_same_shape(y_true=y, **{prob_name: p})
    _v.check_binary_labels(y, "y_true")
    if probabilities:
        _v.check_in_unit_interval(p, prob_name, "predicted probabilities")
    else:
        _v.check_finite(p, prob_name)
    return y.astype(p.dtype), p


def observation_weights(weights: Any, like: jax.Array) -> jax.Array | None:
    """Optional nonnegative weights, one per observation, in ``like``'s dtype."""
    if weights is not None and like.ndim == 1:
        w = _v.as_float_array(weights, "weights")
        _v.check_same_shape(y_prob=like, weights=w)
    return check_weights(weights, like.shape[0], like.dtype)


class Bins(NamedTuple):
    """Resolved binning: a static bin count and either edges or a strategy."""

    num_bins: int
    edges: jax.Array | None  # None: computed in the kernel from the strategy
    strategy: str


def resolve_bins(bins: Any, strategy: str, p: jax.Array) -> Bins:
    """Turn the user's ``bins`` / ``strategy`` into a :class:`Bins`.

    ``bins`` is an int (with ``strategy``), an array of edges, or ``"fd"`` (resolved
    here, eagerly, to Freedman-Diaconis edges on [0, 1]).
    """
    _v.check_choice(strategy, "strategy", STRATEGIES)
    if isinstance(bins, str):
        if bins != "fd":
            raise ValueError(
                f"bins must be an int, an array of bin edges or 'fd' "
                f"(Freedman-Diaconis); got the string {bins!r}."
            )
        if strategy != "uniform":
            raise ValueError(
                "strategy='quantile' needs an int number of bins; bins='fd' already "
                "fixes the edges. Drop strategy or pass bins as an int."
            )
        if not _v.is_concrete(p):
            raise TypeError(
                "bins='fd' chooses the edges from the data, which needs concrete values; "
                "under jax.jit or jax.vmap compute the edges first with "
                "bayescal.core.freedman_diaconis_edges(y_prob) and pass them as bins."
            )
        edges = jnp.asarray(freedman_diaconis_edges(np.asarray(p)), dtype=p.dtype)
        return Bins(int(edges.shape[0]) - 1, edges, "edges")
    if isinstance(bins, int | np.integer) and not isinstance(bins, bool):
        num = _v.check_num_bins(bins, "bins")
        return Bins(num, None, strategy)
    if isinstance(bins, bool) or bins is None or isinstance(bins, float):
        raise TypeError(
            f"bins must be an int, an array of bin edges or 'fd'; got "
            f"{type(bins).__name__} {bins!r}."
        )
    edges = _v.as_float_array(bins, "bins").astype(p.dtype)
    _v.check_edges(edges, "bins")
    if strategy != "uniform":
        raise ValueError(
            "strategy='quantile' needs an int number of bins; explicit edges already "
            "fix the bins. Drop strategy or pass bins as an int."
        )
    return Bins(int(edges.shape[0]) - 1, edges, "edges")


def multiclass_inputs(y_true: Any, probs: Any) -> tuple[jax.Array, jax.Array]:
    """Integer labels ``[N]`` and class probabilities ``[N, C]`` (rows sum to 1)."""
    p = _v.as_float_array(probs, "probs")
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(
            f"probs must be 2-D [N, C] class probabilities with C >= 2; got shape "
            f"{tuple(p.shape)}. For one probability per observation use the binary "
            "functions."
        )
    _v.check_nonempty(p, "probs")
    y = _v.check_class_labels(y_true, "y_true", p.shape[1])
    if y.ndim != 1 or y.shape[0] != p.shape[0]:
        raise ValueError(
            f"y_true has shape {tuple(y.shape)} but probs has shape {tuple(p.shape)}; "
            "pass one integer label per row of probs."
        )
    _v.check_in_unit_interval(p, "probs", "class probabilities")
    tol = 1e-4 if p.dtype == jnp.float32 else 1e-8
    _v.check_row_sums(p, "probs", tol * p.shape[1])
    return y, p


#: The shrinkage of histogram binning's bin values (``None``: the raw frequency).
SHRINKAGES = ("jeffreys",)


def check_shrinkage(shrinkage: Any) -> str | None:
    """Histogram binning's ``shrinkage``: ``"jeffreys"`` or ``None``."""
    if shrinkage is None or (isinstance(shrinkage, str) and shrinkage in SHRINKAGES):
        return shrinkage
    raise ValueError(
        "shrinkage must be 'jeffreys' (the posterior mean (k + 1/2) / (n + 1) of a "
        f"bin's k positives among n) or None (the raw fraction k / n); got {shrinkage!r}."
    )


def check_eps(eps: Any) -> float | None:
    """Optional clipping constant: ``None`` or a float in (0, 0.5)."""
    if eps is None:
        return None
    if isinstance(eps, bool) or not isinstance(eps, int | float | np.floating):
        raise TypeError(f"eps must be None or a float in (0, 0.5); got {eps!r}.")
    if not 0 < float(eps) < 0.5:
        raise ValueError(f"eps must be None or a float in (0, 0.5); got {eps!r}.")
    return float(eps)
