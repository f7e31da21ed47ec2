"""Sphinx configuration for the bayescal docs (myst-nb + autosummary + numpydoc).

The API reference is generated from each public module's ``__all__`` at build time
(:func:`_write_api_pages`), so a new public name gets its page without editing the
docs; ``tests/test_docs.py`` checks the built HTML for one page per public name.
"""

import importlib
import inspect
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

project = "bayescal"
author = "the bayescal developers"
copyright = "2026, the bayescal developers"

import bayescal  # noqa: E402

release = version = bayescal.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.extlinks",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "matplotlib.sphinxext.plot_directive",
    "sphinx_copybutton",
    # MathJax 3 served from _static/mathjax: the site renders maths offline.
    "sphinx-mathjax-offline",
    # docs/_ext/api_titles.py: API pages titled by the object's name, wrapping at "_"
    "api_titles",
]

# The tutorials live in ../tutorials; copy them next to the docs sources so myst-nb
# executes and renders them (the copies are build products, ignored by git).
_tut_src = ROOT / "tutorials"
_tut_dst = HERE / "tutorials"
if _tut_src.is_dir():
    _tut_dst.mkdir(exist_ok=True)
    for nb in _tut_src.glob("*.ipynb"):
        shutil.copy2(nb, _tut_dst / nb.name)

# --- API reference: one page per module, one page per public name ----------------
# The modules documented, in order; every name in a module's ``__all__`` gets a page.
API_MODULES = [
    ("bayescal.core", "Core: result types, calibrators, key helper, resampling"),
    ("bayescal.regression", "Regression: PIT, curves, scores, recalibration"),
    ("bayescal.classification", "Classification: reliability, ECE, calibrators"),
    ("bayescal.numpyro", "NumPyro adapter"),
    ("bayescal.arviz", "ArviZ adapter"),
    ("bayescal.plot", "Plots"),
    ("bayescal.datasets", "Bundled datasets"),
    ("bayescal", "Top level: the compilation cache"),
]


def canonical_module(modname: str, name: str) -> str:
    """The module whose page documents ``modname.name``.

    A name re-exported from another documented module (``CalibrationCurve`` in
    ``bayescal.regression``, ``save_calibrator`` in ``bayescal.classification``) is
    documented once, in the first module of :data:`API_MODULES` that exports the
    same object; the re-exporting module's page links to it.
    """
    obj = getattr(importlib.import_module(modname), name)
    for other, _ in API_MODULES:
        mod = importlib.import_module(other)
        if name in getattr(mod, "__all__", ()) and getattr(mod, name) is obj:
            return other
    return modname


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "Classes"
    if callable(obj) and not hasattr(obj, "__origin__"):
        return "Functions"
    return "Types and constants"


def _write_api_pages() -> None:
    out = HERE / "api" / "modules"
    out.mkdir(parents=True, exist_ok=True)
    for modname, title in API_MODULES:
        mod = importlib.import_module(modname)
        groups: dict[str, list[str]] = {}
        reexports: list[str] = []
        for name in mod.__all__:
            if name.startswith("_"):  # bayescal.__version__
                continue
            home = canonical_module(modname, name)
            if home != modname:
                reexports.append(f":py:obj:`{name} <{home}.{name}>`")
                continue
            groups.setdefault(_kind(getattr(mod, name)), []).append(name)
        heading = f"``{modname}``: {title.split(': ', 1)[-1]}"
        lines = [
            heading,
            "=" * len(heading),
            "",
            f".. automodule:: {modname}",
            "   :no-members:",
            "",
            f".. currentmodule:: {modname}",
            "",
        ]
        if modname == "bayescal.plot":
            lines += ["Every function drawn, with its code: :doc:`/gallery`.", ""]
        for group in ("Functions", "Classes", "Types and constants"):
            if group not in groups:
                continue
            lines += [
                group,
                "-" * len(group),
                "",
                ".. autosummary::",
                "   :toctree: ../generated",
                "   :nosignatures:",
                "",
            ]
            lines += [f"   {name}" for name in groups[group]]
            lines.append("")
        if reexports:
            lines += [
                "Re-exported",
                "-----------",
                "",
                "Also importable from this module, documented once: "
                + ", ".join(reexports)
                + ".",
                "",
            ]
        (out / f"{modname}.rst").write_text("\n".join(lines))


_write_api_pages()


def _public_classes() -> dict[str, str]:
    """Every public class (short name) and the module whose page documents it."""
    out = {}
    for modname, _ in API_MODULES:
        mod = importlib.import_module(modname)
        for name in mod.__all__:
            if inspect.isclass(getattr(mod, name)):
                out[name] = canonical_module(modname, name)
    return out


# --- Links to other projects' docs, offline --------------------------------------
# intersphinx reads small inventories written here from the reviewed table of
# docs/_ext/external_refs.py (no download: the build needs no network); see there
# how to add an object.
sys.path.insert(0, str(HERE / "_ext"))
import external_refs  # noqa: E402

intersphinx_mapping = external_refs.intersphinx_mapping(HERE / "_build" / "intersphinx")
# Only roles that name an inventory or an object of the Python domain reach the other
# projects: a plain {doc}`install` or {ref} stays local.
intersphinx_disabled_reftypes = ["std:*"]
# A reference to another project's object that is not in the table (a typo, a new
# citation) would render as plain code without a link; nitpicky makes it a warning,
# hence a failed build. Only those: unresolved references to our own names (e.g.
# dataclass fields listed under Attributes) are not checked here.
nitpicky = True
nitpick_ignore_regex = [
    (
        r"py:.*",
        r"(?!(?:\w+:|(?:" + "|".join(external_refs.PY_PACKAGES) + r")\.)).*",
    )
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_templates", "experiments"]
templates_path = ["_templates"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]

nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
# A warning printed by an executed cell (stderr output) fails the build under -W.
nb_output_stderr = "warn"

autosummary_generate = True
autosummary_ignore_module_all = False
autosummary_imported_members = True
autodoc_typehints = "none"
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# Types in Parameters / Returns / Attributes link to their docs: only the words named
# below (and numpydoc's defaults: int, float, bool, str, None, callable, sequence,
# array_like, ndarray...) become links; every other word stays plain text ("all").
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"
numpydoc_xref_aliases = {
    # our own result types and calibrators, by their short name
    **{name: f"{home}.{name}" for name, home in _public_classes().items()},
    "calibrator": "bayescal.core.Calibrator",
    # JAX
    "Array": "jax.Array",
    "jax.Array": ":obj:`jax.Array`",
    "key": "jax.random.key",  # "PRNG key or int seed"
    "jax.random.PRNGKey": ":obj:`jax.random.PRNGKey`",
    # NumPy, xarray, ArviZ, NumPyro, Matplotlib, Python
    "numpy.ndarray": ":obj:`numpy.ndarray`",
    "dtype": "numpy.dtype",
    "xarray.DataArray": ":obj:`xarray.DataArray`",
    "xarray.Dataset": ":obj:`xarray.Dataset`",
    "xarray.DataTree": ":obj:`xarray.DataTree`",
    "arviz.InferenceData": ":obj:`arviz.InferenceData`",
    "numpyro.distributions.Distribution": ":obj:`numpyro.distributions.Distribution`",
    "Axes": "matplotlib.axes.Axes",
    "matplotlib.axes.Axes": ":obj:`matplotlib.axes.Axes`",
    "color": ":ref:`color <matplotlib:colors_def>`",
    "colors": ":ref:`colors <matplotlib:colors_def>`",
    "mapping": ":term:`python:mapping`",
    "path-like": ":term:`path-like <python:path-like object>`",
    **{exc: f":obj:`{exc}`" for exc in ("ValueError", "TypeError", "FileNotFoundError")},
    # "Array, scalar" is a 0-d jax.Array, not one of NumPy's scalar types (numpydoc's
    # default link): mapped to itself, it stays plain text.
    "scalar": "scalar",
}
# Every parameter documented and no undocumented one listed (PR01, PR02), parameters
# described and typed (PR04, PR07), returns described (RT01, RT03), no unknown sections
# (GL06, GL07), a summary line (SS01).
numpydoc_validation_checks = {"PR01", "PR02", "RT01", "GL06", "GL07", "SS01"}
# The private kernels and dunder members are not public API; the Calibrator protocol
# has no constructor.
numpydoc_validation_exclude = {
    r"\._src\.",
    r"\.__\w+__$",
    r"\.(count|index)$",
    r"^bayescal\.core\.Calibrator$",
    # inherited from NumPyro's Distribution, documented in NumPyro's own style
    r"^bayescal\.numpyro\.RecalibratedDistribution\.(enumerate_support|expand|expand_by|get_args|infer_shapes|mask|sample_with_intermediates|shape|to_event|validate_args|tree_flatten|tree_unflatten|vmap_over)$",
}
# Result types and fitted calibrators document their fields under Attributes, as
# scikit-learn does; their constructors are not called by users.
numpydoc_validation_overrides = {"PR01": [r"(?m)^\s*Attributes\n\s*-{3,}"]}

plot_include_source = True
plot_html_show_source_link = False
plot_html_show_formats = False
plot_formats = [("png", 100)]

extlinks = {
    "doi": ("https://doi.org/%s", "doi:%s"),
    "jax": ("https://docs.jax.dev/en/latest/%s", "%s"),
}

html_theme = "pydata_sphinx_theme"
html_title = "bayescal"
html_static_path = ["_static"]
html_css_files = ["bayescal.css"]
html_theme_options = {
    "icon_links": [],
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
}
# No empty left sidebar on pages without sub-pages: the content gets the width.
html_sidebars = {
    "index": [],
    "getting-started": [],
    "install": [],
    "conventions": [],
    "benchmarks": [],
    "faq": [],
    "references": [],
    "citing": [],
    "changelog": [],
    "gpu": [],
    "choosing": [],
    "gallery": [],
    "arviz-cli": [],
    "tutorials/*": [],
    "api/index": [],
}
suppress_warnings = ["mystnb.unknown_mime_type"]

# BAYESCAL_DOCS_FAST=1: render the notebooks without executing them (quick local checks
# of the API pages; `make docs` always executes).
import os  # noqa: E402

if os.environ.get("BAYESCAL_DOCS_FAST"):
    nb_execution_mode = "off"
