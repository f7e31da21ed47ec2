"""The private kernels that the tests check directly (not part of the public API)."""

from bayescal._src.bands import (  # noqa: F401
    binomial_acceptance_intervals,
    binomial_quantile,
    corp_consistency_band,
)
from bayescal._src.binned import (  # noqa: F401
    bin_midpoints,
    binned_means,
    freedman_diaconis_edges,
    quantile_edges,
    uniform_edges,
)
from bayescal._src.binning import bin_index, bin_sums, count_at_or_below, grid_index  # noqa: F401
from bayescal._src.functionals import area_between, ecdf_area_to_diagonal  # noqa: F401
from bayescal._src.resampling import bayesian_bootstrap_weights, bootstrap_indices  # noqa: F401
from bayescal._src.sorting import sort_last_axis  # noqa: F401
from bayescal._src.ties import (  # noqa: F401
    IsotonicFit,
    PooledTies,
    argsort_last_axis,
    isotonic_fit,
    pool_ties,
)
