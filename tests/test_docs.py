"""The built docs document every public name (run after ``make docs``).

These tests read the HTML that ``sphinx-build -W`` wrote (``docs/_build/html``, or
``$BAYESCAL_DOCS_HTML``); the Makefile's ``docs`` target runs them right after the
build, which itself fails on any warning (docstring, notebook cell output, numpydoc
validation). Marked ``docs``: the plain test run deselects them.
"""

from __future__ import annotations

import importlib
import os
import pathlib
import re
import sys

import pytest

from tests._public import PUBLIC_MODULES

ROOT = pathlib.Path(__file__).resolve().parent.parent
HTML = pathlib.Path(os.environ.get("BAYESCAL_DOCS_HTML", ROOT / "docs" / "_build" / "html"))

pytestmark = pytest.mark.docs


def _conf():
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import conf  # the docs' own rule for where a re-exported name is documented
    finally:
        sys.path.pop(0)
    return conf


def _built() -> pathlib.Path:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"no built docs at {HTML}: run `make docs` first")
    return HTML


def _public_names():
    for modname in PUBLIC_MODULES:
        for name in importlib.import_module(modname).__all__:
            if not name.startswith("_"):  # __version__
                yield modname, name


@pytest.mark.parametrize(("modname", "name"), list(_public_names()))
def test_every_public_name_has_a_page(modname, name):
    html = _built()
    home = _conf().canonical_module(modname, name)
    page = html / "api" / "generated" / f"{home}.{name}.html"
    assert page.is_file(), f"{modname}.{name}: no API page {page.name}"
    text = page.read_text(encoding="utf-8")
    # The object's description was rendered (autodoc ran), not just a stub title.
    assert f'id="{home}.{name}"' in text, f"{page.name} has no rendered description"


def test_documented_modules_are_the_public_ones():
    # A new public module must be added to the docs too.
    assert [m for m, _ in _conf().API_MODULES] == list(PUBLIC_MODULES)


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_module_pages_render_their_directives(modname):
    # The bug of issue 11: rst stubs read as Markdown showed ".. automodule::" as text.
    text = (_built() / "api" / "modules" / f"{modname}.html").read_text(encoding="utf-8")
    assert ".. automodule::" not in text and ".. autosummary::" not in text
    assert "api/generated/" in text or "../generated/" in text


def test_function_pages_render_numpydoc_sections():
    text = (_built() / "api" / "generated" / "bayescal.regression.pit_normal.html").read_text(
        encoding="utf-8"
    )
    for section in ("Parameters", "Returns", "Examples"):
        assert re.search(rf">{section}<", text), section


def test_maths_is_served_locally():
    # The pages work offline: MathJax comes from _static, not a CDN.
    html = _built()
    page = (html / "conventions.html").read_text(encoding="utf-8")
    assert "cdn.jsdelivr.net" not in page and "_static/mathjax/tex-chtml.js" in page
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()


def _external_refs():
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import external_refs  # the reviewed table behind the offline intersphinx
    finally:
        sys.path.pop(0)
    return external_refs


def test_external_inventories_load():
    # Each table reads back through Sphinx's own inventory loader, entry for entry,
    # every object at an https page of its project's site, anchored.
    import io
    import posixpath

    from sphinx.util.inventory import InventoryFile

    refs = _external_refs()
    for key, project in refs.PROJECTS.items():
        assert project.base_url.startswith("https://") and project.base_url.endswith("/")
        data = io.BytesIO(refs.inventory_bytes(key, project))
        inv = InventoryFile.load(data, project.base_url, posixpath.join)
        assert sum(len(v) for v in inv.values()) == len(project.objects), key
        for kind, name, uri in project.objects:
            item = inv[kind][name]
            # a (project, version, uri, display name) tuple before Sphinx 8.2
            item_uri = item.uri if hasattr(item, "uri") else item[2]
            assert item_uri == project.base_url + uri, (key, name)
            page, _, anchor = uri.partition("#")
            assert page.endswith(".html") and (anchor or kind == "std:doc"), (key, name)
            if kind.startswith("py:") and kind != "py:module":
                # autodoc anchors an object at its full dotted name
                assert anchor.split(".")[-1] == name.split(".")[-1], (key, name)


# (page, a link it must hold): one or two per external project, from numpydoc type
# fields (xref_param_type), explicit roles in docstrings and roles in the pages.
EXTERNAL_LINKS = [
    (
        "api/generated/bayescal.numpyro.loo_pit.html",
        "https://num.pyro.ai/en/stable/utilities.html#numpyro.infer.util.log_likelihood",
    ),
    (
        "api/generated/bayescal.numpyro.loo_pit.html",
        "https://python.arviz.org/en/v0.23.4/api/generated/arviz.psislw.html#arviz.psislw",
    ),
    (
        "api/generated/bayescal.numpyro.loo_pit.html",
        "https://docs.python.org/3/library/typing.html#typing.NamedTuple",
    ),
    (
        "api/generated/bayescal.regression.pit_normal.html",
        "https://numpy.org/doc/stable/glossary.html#term-array_like",
    ),
    (
        "api/generated/bayescal.regression.pit_normal.html",
        "https://docs.jax.dev/en/latest/_autosummary/jax.Array.html#jax.Array",
    ),
    (
        "api/generated/bayescal.arviz.pit.html",
        "https://docs.xarray.dev/en/stable/generated/xarray.DataTree.html#xarray.DataTree",
    ),
    (
        "api/generated/bayescal.arviz.pit.html",
        "https://python.arviz.org/en/v0.23.4/api/generated/arviz.InferenceData.html"
        "#arviz.InferenceData",
    ),
    (
        "api/generated/bayescal.plot.pit_ecdf.html",
        "https://matplotlib.org/stable/api/_as_gen/matplotlib.axes.Axes.html"
        "#matplotlib.axes.Axes",
    ),
    (
        "api/generated/bayescal.core.isotonic_regression.html",
        "https://docs.scipy.org/doc/scipy/reference/generated/"
        "scipy.optimize.isotonic_regression.html#scipy.optimize.isotonic_regression",
    ),
    ("api/modules/bayescal.numpyro.html", "https://num.pyro.ai/en/stable/"),
    ("gpu.html", "https://docs.jax.dev/en/latest/installation.html"),
    ("install.html", "https://num.pyro.ai/en/stable/index.html"),
    ("arviz-cli.html", "https://python.arviz.org/en/v0.23.4/"),
]


@pytest.mark.parametrize(("page", "url"), EXTERNAL_LINKS)
def test_external_references_link_to_the_projects_docs(page, url):
    text = (_built() / page).read_text(encoding="utf-8")
    assert re.search(rf'<a class="reference external" href="{re.escape(url)}', text), (
        f"{page}: no link to {url}"
    )


def test_param_types_link_to_our_own_types():
    # numpydoc_xref_aliases: the short name of a public class in a type field links
    # to its page; plain words of a type stay text.
    text = (_built() / "api/generated/bayescal.plot.pit_ecdf.html").read_text(
        encoding="utf-8"
    )
    assert 'href="bayescal.core.Band.html#bayescal.core.Band"' in text
    assert "PRNG <a" in text  # "PRNG key": only "key" is a link (to jax.random.key)


def test_index_page_shows_code_and_a_figure():
    # Issue 21: the home page had no code and no picture. The example is executed at
    # build time (myst-nb), so its figure is an image of the built page.
    text = (_built() / "index.html").read_text(encoding="utf-8")
    assert 'class="highlight-python' in text or 'class="highlight-ipython3' in text
    assert "fit_isotonic_recalibrator" in text
    assert re.search(r'<img[^>]+src="_images/[^"]+\.png"', text), "no figure on index.html"
    assert "coverage of the recalibrated 90% intervals" in text  # the cell's output


def test_api_pages_titled_by_the_name_breaking_between_words():
    # Issue 21: full dotted titles were clipped mid-word in the heading and sidebar.
    page = _built() / "api" / "generated" / "bayescal.regression.fit_isotonic_recalibrator.html"
    text = page.read_text(encoding="utf-8")
    h1 = re.search(r"<h1>(.*?)<a class=\"headerlink\"", text, flags=re.S).group(1)
    assert h1 == "fit_<wbr>isotonic_<wbr>recalibrator"
    title = re.search(r"<title>(.*?)</title>", text, flags=re.S).group(1)
    assert title.startswith("fit_isotonic_recalibrator") and "wbr" not in title
    # the sidebar entries break at "_" too
    # (the theme rewrites the sidebar's HTML: <wbr/>)
    assert re.search(r">expected_<wbr/?>normalized_<wbr/?>calibration_<wbr/?>error</a>", text)
