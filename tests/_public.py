"""The public modules: each ``__all__`` name has a docs page (tests/test_docs.py) and
a signature type checkers see (tests/test_typing.py)."""

PUBLIC_MODULES = (
    "bayescal.core",
    "bayescal.regression",
    "bayescal.classification",
    "bayescal.numpyro",
    "bayescal.arviz",
    "bayescal.plot",
    "bayescal.datasets",
    "bayescal",  # enable_compilation_cache
)
