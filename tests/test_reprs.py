"""Short reprs (issue 37): results and fitted calibrators print headline numbers first
and summarize arrays, like NumPy's threshold summarization, whatever their size."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayescal  # noqa: F401  (imports both branches, so REGISTRY is full)
from bayescal import classification as C
from bayescal._src.pytree import BEFORE_LOOKUP, REGISTRY
from bayescal._src.reprs import summarize
from bayescal.core import BootstrapResult, NullTestResult, bootstrap, null_pvalue

N = 100_000
LIMIT = 600  # the bound on a repr, for any size


def _field_text(text: str, name: str) -> str:
    """The text of ``name=...`` up to the next top-level ', ' or the closing paren."""
    m = re.search(rf"\b{name}=", text)
    assert m, (name, text)
    depth, i = 0, m.end()
    while i < len(text):
        ch = text[i]
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        i += 1
    return text[m.end() : i]


def _reads_back(text: str, value) -> bool:
    """``text`` parses, in the dtype of ``value``, to exactly ``value``."""
    v = np.asarray(value)
    return bool(v.dtype.type(text) == v)


def _stat(x):
    return jnp.abs(jnp.mean(x))


def _sim(k):
    return jax.random.normal(k, (25,))


def test_null_test_result_large_is_short_with_headline_numbers():
    res = null_pvalue(jax.random.key(0), _stat, 0.3, _sim, num_samples=N)
    text = repr(res)
    assert len(text) < LIMIT, text
    assert text.startswith("NullTestResult(statistic=")
    # scalars print as numbers that read back to the fields exactly (NumPy's shortest
    # round-trip text of the value in its dtype)
    assert _reads_back(_field_text(text, "statistic"), res.statistic)
    assert _reads_back(_field_text(text, "pvalue"), res.pvalue)
    samples = _field_text(text, "samples")
    assert f"{N} {res.samples.dtype} values" in samples
    mean = float(re.search(r"mean (\S+)>", samples).group(1))
    assert mean == pytest.approx(float(np.mean(np.asarray(res.samples, np.float64))),
                                 rel=1e-3)
    assert text.index("statistic=") < text.index("pvalue=") < text.index("samples=")


def test_bootstrap_result_large_and_pytree_valued():
    x = jax.random.normal(jax.random.key(1), (N,))
    res = bootstrap(jax.random.key(0), jnp.mean, x, num_samples=200)
    text = repr(res)
    assert len(text) < LIMIT, text
    for name in ("estimate", "lower", "upper"):
        assert _reads_back(_field_text(text, name), getattr(res, name))
    assert "<200 " in _field_text(text, "samples")

    def metric(v):  # a pytree of a scalar and a long curve
        return {"mean": jnp.mean(v), "q": jnp.quantile(v, jnp.linspace(0, 1, 500))}

    res = bootstrap(jax.random.key(0), metric, x[:2000], num_samples=200)
    text = repr(res)
    assert len(text) < LIMIT, text
    assert "float32[200, 500]" in text or "float64[200, 500]" in text
    assert repr(float(np.asarray(res.estimate["mean"]))) != ""  # readable field
    assert str(np.asarray(res.estimate["mean"])[()]) in text


def test_many_keys_fall_back_to_a_count():
    many = {f"metric_{i}": jnp.float32(i) for i in range(200)}
    text = repr(BootstrapResult(many, many, many, many))
    assert len(text) < LIMIT and "<dict of 200" in text


def test_vmapped_results_have_a_leading_batch_axis():
    run = jax.vmap(lambda k: null_pvalue(k, _stat, 0.3, _sim, num_samples=99))
    small = run(jax.random.split(jax.random.key(0), 4))
    text = repr(small)
    # four p-values print in full, as NumPy would
    got = [float(v) for v in _field_text(text, "pvalue").strip("[]").split(",")]
    np.testing.assert_allclose(got, np.asarray(small.pvalue), rtol=1e-3)
    big = run(jax.random.split(jax.random.key(0), 500))
    text = repr(big)
    dtype = big.samples.dtype
    assert len(text) < LIMIT and f"{dtype}[500, 99]" in text
    assert f"<500 {dtype} values" in _field_text(text, "pvalue")


def test_repr_of_traced_fields_does_not_raise():
    seen = []

    def f(k):
        res = null_pvalue(k, _stat, 0.3, _sim, num_samples=99)
        seen.append(repr(res))
        seen.append(repr(BootstrapResult({"a": res.statistic}, res.pvalue, res.pvalue,
                                         (res.samples,))))
        return res

    jax.make_jaxpr(f)(jax.random.key(0))
    jax.jit(f)(jax.random.key(3))
    assert seen and all("traced" in s and len(s) < LIMIT for s in seen)

    cal = C.fit_platt(np.array([0, 1, 0, 1, 1]), np.array([0.2, 0.7, 0.4, 0.9, 0.6]))

    def g(c):
        seen.append(repr(c))  # the calibrator's arrays are tracers here
        return c.a

    jax.jit(g)(cal)
    assert seen[-1].startswith("PlattCalibrator(a=<traced")


def test_namedtuple_behaviour_is_kept():
    res = null_pvalue(jax.random.key(0), _stat, 0.3, _sim, num_samples=99)
    stat, pval, samples = res
    assert res._fields == ("statistic", "pvalue", "samples")
    assert res._replace(pvalue=1.0).pvalue == 1.0 and stat is res.statistic
    leaves, tree = jax.tree_util.tree_flatten(res)
    assert len(leaves) == 3 and isinstance(tree.unflatten(leaves), NullTestResult)
    back = jax.jit(lambda r: r)(res)
    assert isinstance(back, NullTestResult) and bool(back.pvalue == pval)


def _fits():
    rng = np.random.default_rng(0)
    p = rng.uniform(size=N).astype(np.float32)
    y = (rng.uniform(size=N) < p).astype(np.int32)
    probs = rng.dirichlet(np.ones(4), size=2000).astype(np.float32)
    labels = rng.integers(0, 4, 2000)
    return [
        C.fit_isotonic(y, p),
        C.fit_platt(y, p),
        C.fit_histogram_binning(y, p),
        C.fit_beta(y, p),
        C.fit_temperature(labels, np.log(probs)),
        C.fit_one_vs_rest(labels, probs),
    ]


def test_fitted_calibrators_are_short_with_scalars_as_numbers():
    for cal in _fits():
        text = repr(cal)
        name = type(cal).__name__
        assert text.startswith(name + "(") and len(text) < LIMIT, text
        for f in cal._data_fields:
            v = getattr(cal, f)
            if hasattr(v, "ndim") and v.ndim == 0:
                assert _reads_back(_field_text(text, f), v), (f, text)
    iso = _fits()[0]
    assert f"<{iso.thresholds.shape[0]} {iso.thresholds.dtype} values" in repr(iso)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_class_is_short_at_any_size(name):
    for hook in BEFORE_LOOKUP:
        hook()
    cls = REGISTRY[name]
    big = jnp.linspace(0.0, 1.0, N, dtype=jnp.float32)
    fields = {f: big for f in cls._data_fields} | {f: None for f in cls._meta_fields}
    obj = object.__new__(cls)  # no fit: only the repr is under test
    for f, v in fields.items():
        object.__setattr__(obj, f, v)
    text = repr(obj)
    assert text.startswith(name + "(") and len(text) < LIMIT, text
    assert text.count(f"<{N} float32 values, mean 0.5>") == len(cls._data_fields)


def test_summarize_never_raises_and_is_bounded():
    x = jnp.arange(10.0)
    x.delete()
    assert summarize(x).startswith("<")
    assert summarize(jax.random.split(jax.random.key(0), 3)).endswith("keys>")
    assert summarize(np.array([], np.float32)) == "[]"  # as NumPy prints it
    assert summarize(np.zeros((0, 3), np.float32)) == "<float32[0, 3]>"
    assert len(summarize(tuple(range(10_000)))) < 100
    assert summarize(np.array([True, False])).replace(" ", "") == "[True,False]"
