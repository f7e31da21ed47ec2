"""Binomial and Student-t quantiles in XLA, for accelerators (no host callback).

On CPU these quantiles run on the host in float64 (scipy, through
``jax.pure_callback``): faster there, and the reference. On a GPU a callback is a
device -> host -> device round trip, so :func:`bayescal._src.sorting.by_platform`
picks these device versions on every platform but CPU.

* :func:`device_binomial_ppf`: the smallest whole ``k`` with ``P(X <= k) >= q``,
  ``X ~ Bin(n, p)`` (``scipy.stats.binom.ppf``'s rule and edge cases), by bisection
  on whole numbers inside a bracket from a normal approximation (checked, and widened
  to ``[-1, n]`` when it does not hold). The CDF is the regularized incomplete beta
  function ``I_{1-p}(n - k, k + 1)`` by its continued fraction, whose prefactor is a
  binomial probability computed by Loader's saddle point formula (``stirlerr`` and
  ``bd0``, as R's ``dbinom``): ``jax.scipy.special.betainc`` takes that prefactor
  from ``lgamma`` differences and in float32 was off by 0.04 in the CDF at
  n = 1e5 and 0.3 at 1e6 (lgamma(1e5) ~ 1e6 has an ulp of 0.06), this one is
  accurate to a few float32 ulps of the probability at any n.
* :func:`device_t_quantile`: the Student-t quantile by bisection on the bit pattern
  of ``|t|`` (positive floats order as their bits: 32 or 64 steps give the answer to
  an ulp, whatever its magnitude) of the t CDF from ``jax.scipy.special.betainc``.

References: C. Loader (2000), "Fast and accurate computation of binomial
probabilities"; Press et al., *Numerical Recipes*, 6.4 (the continued fraction of
the incomplete beta function, modified Lentz).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betainc, ndtri

__all__ = ["binomial_cdf", "device_binomial_ppf", "device_t_quantile"]

# stirlerr(k) = log(k!) - log(sqrt(2 pi k) (k / e)^k) for k = 0..15 (R's nmath table
# at whole numbers; stirlerr(0) = 0 by convention, unused)
_STIRLERR = np.array(
    [
        0.0,
        0.0810614667953272582196702,
        0.0413406959554092940938221,
        0.02767792568499833914878929,
        0.02079067210376509311152277,
        0.01664469118982119216319487,
        0.01387612882307074799874573,
        0.01189670994589177009505572,
        0.01041126526197209649747856,
        0.009255462182712732917728637,
        0.008330563433362871256469318,
        0.007573675487951840794972024,
        0.006942840107209529865664152,
        0.006408994188004207068439631,
        0.005951370112758847735624416,
        0.005554733551962801371038690,
    ]
)
_S0, _S1, _S2, _S3, _S4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188


def _stirlerr(k: jax.Array) -> jax.Array:
    """Stirling's error ``log(k!) - log(sqrt(2 pi k) (k/e)^k)`` at whole ``k >= 0``."""
    table = jnp.asarray(_STIRLERR, k.dtype)
    small = table[jnp.clip(k, 0, 15).astype(jnp.int32)]
    kk = jnp.maximum(k, 16)
    nn = kk * kk
    series = (_S0 - (_S1 - (_S2 - (_S3 - _S4 / nn) / nn) / nn) / nn) / kk
    return jnp.where(k <= 15, small, series)


def _bd0(x: jax.Array, m: jax.Array) -> jax.Array:
    """Loader's deviance term ``x log(x / m) + m - x``, without cancellation (x, m > 0)."""
    d = x - m
    s = x + m
    v = d / s
    close = jnp.abs(d) < 0.1 * s
    v2 = v * v
    total = d * v
    ej = 2 * x * v
    for j in range(1, 12):  # |v| < 0.1 / 1.1 ... < 0.1: 11 terms are past float64's eps
        ej = ej * v2
        total = total + ej / (2 * j + 1)
    safe_x = jnp.where(x > 0, x, 1)
    far = x * jnp.log(safe_x / m) + m - x
    return jnp.where(close, total, far)


def _binomial_pmf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``P(X = k)`` for ``X ~ Bin(n, p)``, whole ``0 <= k <= n``, ``0 < p < 1``
    (Loader's formula: relative accuracy of a few ulps)."""
    q = 1 - p
    at_zero = jnp.exp(n * jnp.log1p(-p))
    at_n = jnp.exp(n * jnp.log(p))
    kk = jnp.clip(k, 1, jnp.maximum(n - 1, 1))
    lc = (
        _stirlerr(n)
        - _stirlerr(kk)
        - _stirlerr(n - kk)
        - _bd0(kk, n * p)
        - _bd0(n - kk, n * q)
    )
    lf = math.log(2 * math.pi) + jnp.log(kk) + jnp.log1p(-kk / n)
    inner = jnp.exp(lc - 0.5 * lf)
    return jnp.where(k == 0, at_zero, jnp.where(k == n, at_n, inner))


def _beta_cf(a: jax.Array, b: jax.Array, x: jax.Array) -> jax.Array:
    """The continued fraction of ``I_x(a, b)`` (Numerical Recipes' ``betacf``, modified
    Lentz), iterated until every element converged (at most ``4 sqrt(a + b) + 64``
    terms: it converges in ``O(sqrt(max(a, b)))`` for ``x < (a + 1) / (a + b + 2)``)."""
    dtype = x.dtype
    tiny = jnp.asarray(
        jnp.finfo(dtype).tiny * 1e3 if dtype == jnp.float32 else 1e-300, dtype
    )
    eps = jnp.finfo(dtype).eps
    qab, qap, qam = a + b, a + 1, a - 1
    c = jnp.ones_like(x)
    d = 1 - qab * x / qap
    d = jnp.where(jnp.abs(d) < tiny, tiny, d)
    d = 1 / d
    h = d
    cap = 4 * jnp.sqrt(jnp.max(a + b)) + 64

    def cond(state):
        m, _, _, _, done = state
        return (m <= cap) & ~jnp.all(done)

    def body(state):
        m, c, d, h, done = state
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d1 = 1 + aa * d
        d1 = 1 / jnp.where(jnp.abs(d1) < tiny, tiny, d1)
        c1 = 1 + aa / c
        c1 = jnp.where(jnp.abs(c1) < tiny, tiny, c1)
        h1 = h * d1 * c1
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d2 = 1 + aa * d1
        d2 = 1 / jnp.where(jnp.abs(d2) < tiny, tiny, d2)
        c2 = 1 + aa / c1
        c2 = jnp.where(jnp.abs(c2) < tiny, tiny, c2)
        delta = d2 * c2
        h2 = h1 * delta
        keep = done
        new_done = done | (jnp.abs(delta - 1) <= eps)
        pick = lambda old, new: jnp.where(keep, old, new)  # noqa: E731
        return m + 1, pick(c, c2), pick(d, d2), pick(h, h2), new_done

    one = jnp.asarray(1, dtype)
    state = (one, c, d, h, jnp.zeros(x.shape, bool))
    return jax.lax.while_loop(cond, body, state)[3]


def binomial_cdf(k: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``P(X <= k)`` for ``X ~ Bin(n, p)`` at whole ``k`` (any, clipped), in XLA.

    ``I_{1-p}(n - k, k + 1)``; with ``a = n - k``, ``b = k + 1``, ``x = 1 - p`` the
    prefactor ``x^a (1 - x)^b / (a B(a, b))`` is ``(1 - x) P(Bin(n, x) = a)`` and the
    one of the complement ``x^a (1 - x)^b / (b B(a, b))`` is ``x P(Bin(n, 1 - x) = b)``.
    """
    k, n, p = jnp.broadcast_arrays(k, n, p)
    dtype = p.dtype
    inside = (k >= 0) & (k < n) & (p > 0) & (p < 1)
    kk = jnp.where(inside, k, 0)
    nn = jnp.where(inside, n, 1)
    pp = jnp.where(inside, p, jnp.asarray(0.5, dtype))
    a, b = nn - kk, kk + 1
    x = 1 - pp  # the probability of a failure
    direct = x * (a + b + 2) < a + 1
    # direct: I_x(a, b) = (1 - x) pmf(a; n, x) cf(a, b, x); else 1 - x pmf(b; n, 1-x)
    # cf(b, a, 1 - x), with pmf(a; n, x) = pmf(k; n, p) and pmf(b; n, 1-x) = pmf(k+1)
    pmf_k = _binomial_pmf(kk, nn, pp)
    pmf_k1 = _binomial_pmf(jnp.minimum(kk + 1, nn), nn, pp)
    aa = jnp.where(direct, a, b)
    bb = jnp.where(direct, b, a)
    xx = jnp.where(direct, x, pp)
    cf = _beta_cf(aa, bb, xx)
    value = jnp.where(direct, pp * pmf_k * cf, 1 - x * pmf_k1 * cf)
    value = jnp.clip(value, 0, 1)
    edge = jnp.where(k < 0, 0.0, jnp.where(k >= n, 1.0, jnp.where(p <= 0, 1.0, 0.0)))
    return jnp.where(inside, value, edge.astype(dtype))


def _whole_bits(dtype) -> int:
    return jnp.finfo(dtype).nmant + 2  # whole numbers up to 2^(nmant + 1) are exact


def device_binomial_ppf(q: jax.Array, n: jax.Array, p: jax.Array) -> jax.Array:
    """``scipy.stats.binom.ppf(q, n, p)`` in XLA (see the module docstring).

    Broadcasts ``q``, ``n``, ``p``; returns ``p``'s float dtype: ``-1`` for ``q = 0``,
    ``n`` for ``q = 1``, NaN for ``n`` not a nonnegative whole number or ``p`` outside
    [0, 1] (or NaN arguments).

    Examples
    --------
    >>> from bayescal._src.device_quantiles import device_binomial_ppf
    >>> import jax.numpy as jnp
    >>> device_binomial_ppf(jnp.array([0.025, 0.975]), 20.0, 0.5).tolist()
    [6.0, 14.0]
    """
    dtype = jnp.promote_types(jnp.result_type(p), jnp.float32)
    q, n, p = (jnp.asarray(v, dtype) for v in (q, n, p))
    q, n, p = jnp.broadcast_arrays(q, n, p)
    valid = (n >= 0) & (n == jnp.floor(n)) & (p >= 0) & (p <= 1) & (q >= 0) & (q <= 1)
    nn = jnp.where(valid, n, 0)
    pp = jnp.where(valid, p, 0.5)
    qq = jnp.where(valid & (q > 0) & (q < 1), q, 0.5)
    # bracket from the normal approximation with the skewness (Cornish-Fisher) term
    sd = jnp.sqrt(nn * pp * (1 - pp))
    z = ndtri(qq)
    guess = jnp.floor(nn * pp + z * sd + (z * z - 1) * (1 - 2 * pp) / 6 - 0.5)
    width = 3 + jnp.ceil(0.05 * sd)
    lo0 = jnp.clip(guess - width, -1, nn)
    hi0 = jnp.clip(guess + width, -1, nn)
    lo = jnp.where(binomial_cdf(lo0, nn, pp) < qq, lo0, -1)  # cdf(lo) < q <= cdf(hi)
    hi = jnp.where(binomial_cdf(hi0, nn, pp) >= qq, hi0, nn)
    lo = jnp.minimum(lo, hi - 1)

    def cond(state):
        lo, hi = state
        return jnp.any(hi - lo > 1)

    def body(state):
        lo, hi = state
        mid = jnp.floor((lo + hi) / 2)
        go = hi - lo > 1
        up = binomial_cdf(mid, nn, pp) >= qq
        return jnp.where(go & ~up, mid, lo), jnp.where(go & up, mid, hi)

    _, k = jax.lax.while_loop(cond, body, (lo, hi))
    k = jnp.where(q <= 0, -1, jnp.where(q >= 1, nn, k))
    return jnp.where(valid, k, jnp.nan).astype(dtype)


def _uint(dtype):
    return jnp.uint64 if jnp.dtype(dtype).itemsize == 8 else jnp.uint32


def _t_lower_tail(t: jax.Array, nu: jax.Array) -> jax.Array:
    """``P(T <= -t)`` for ``t >= 0``, accurate relative to its value in the far tail.

    ``0.5 I_x(nu/2, 1/2)`` with ``x = nu / (nu + t^2)`` wherever that is below 1/4,
    else ``0.5 - 0.5 I_{1-x}(1/2, nu/2)`` (:func:`bayescal._src.families.cdf` switches
    at ``t^2 = nu``, which loses the tail to cancellation for large ``nu``); ``x`` and
    ``1 - x`` come from ``s = t / sqrt(nu)`` or ``1 / s`` without overflow.
    """
    half = jnp.asarray(0.5, t.dtype)
    s = t / jnp.sqrt(nu)
    small = s < 1
    s_ = jnp.where(small, s, 1)
    r = 1 / jnp.where(small, 1, s)
    x = jnp.where(small, 1 / (1 + s_ * s_), r * r / (1 + r * r))  # nu / (nu + t^2)
    y = jnp.where(small, s_ * s_ / (1 + s_ * s_), 1 / (1 + r * r))  # t^2 / (nu + t^2)
    far = half * betainc(nu / 2, half, x)
    near = half - half * betainc(half, nu / 2, y)
    return jnp.where(far < 0.25, far, near)


def device_t_quantile(p: jax.Array, df) -> jax.Array:
    """Quantile of Student's t with ``df`` degrees of freedom at ``p``, in XLA.

    Bisection on the bits of ``|t|`` for the lower tail ``P(T <= -|t|) = min(p, 1-p)``
    with the t CDF from ``betainc`` (:func:`_t_lower_tail`): the answer to an ulp of
    the CDF's own accuracy (``scipy.special.stdtrit`` is the reference; see
    tests/test_device_quantiles.py for the tolerances). ``p = 0, 1`` give -inf, inf.

    Examples
    --------
    >>> from bayescal._src.device_quantiles import device_t_quantile
    >>> import jax.numpy as jnp
    >>> round(float(device_t_quantile(jnp.float32(0.975), 5.0)), 4)
    2.5706
    """
    p = jnp.asarray(p)
    dtype = jnp.promote_types(p.dtype, jnp.float32)
    p = p.astype(dtype)
    df = jnp.broadcast_to(jnp.asarray(df, dtype), p.shape)
    target = jnp.minimum(p, 1 - p)
    uint = _uint(dtype)
    top = jax.lax.bitcast_convert_type(jnp.asarray(jnp.finfo(dtype).max, dtype), uint)
    lo = jnp.zeros(p.shape, uint)  # tail(bits lo) > target >= tail(bits hi)
    hi = jnp.full(p.shape, top, uint)
    steps = 8 * jnp.dtype(dtype).itemsize

    def tail(bits):
        return _t_lower_tail(jax.lax.bitcast_convert_type(bits, dtype), df)

    def body(_, state):
        lo, hi = state
        mid = lo + (hi - lo) // 2
        below = tail(mid) <= target
        go = hi - lo > 1
        return jnp.where(go & ~below, mid, lo), jnp.where(go & below, mid, hi)

    _, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    t = jax.lax.bitcast_convert_type(hi, dtype)
    if dtype == jnp.float32:
        # float32 betainc loses digits at large nu/2 (lgamma differences): there the
        # expansion of t in 1/nu around the normal quantile (Abramowitz & Stegun
        # 26.7.5, four terms; the next is below 1e-6 relative for nu >= 200, z <= 6)
        z = -ndtri(target)
        z2 = z * z
        g1 = (z2 + 1) * z / 4
        g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
        g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
        g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
        expansion = z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df
        t = jnp.where(df >= 200, expansion, t)
    t = jnp.where(target <= 0, jnp.inf, jnp.where(p == 0.5, 0, t))
    out = jnp.where(p < 0.5, -t, t)
    bad = jnp.isnan(p) | (p < 0) | (p > 1) | ~(df > 0)
    return jnp.where(bad, jnp.nan, out).astype(dtype)
