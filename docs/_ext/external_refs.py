"""Offline intersphinx: the external objects the bayescal docs link to, reviewed by hand.

``sphinx.ext.intersphinx`` normally downloads each project's ``objects.inv``. The docs
build without network access (CI, air-gapped machines), so instead :data:`PROJECTS`
lists, for every external project, the objects our docstrings and pages really cite,
with the page and anchor at which that project's own docs document them.
``docs/conf.py`` calls :func:`intersphinx_mapping` at import time, which writes one
small ``objects.inv`` per project (the version-2 format that Sphinx itself writes:
four header lines, then the zlib-compressed ``name domain:type priority uri dispname``
lines) under ``docs/_build/intersphinx/`` (git-ignored, never committed) and maps the
project's real base URL to that local file. Intersphinx then turns ``:func:`jax.jit```,
a numpydoc ``Parameters`` type such as ``jax.Array``, or
``{external+jax:doc}`installation``` into a link to the real site, with no download.

Adding an entry: find the page that documents the object in the project's docs
*source* (its autosummary / ``autoclass`` directive; the anchor is the full dotted
name the directive documents, which may differ from the public import path, e.g.
NumPyro's ``numpyro.infer.util.Predictive``), add ``(domain:type, name, relative
uri)`` to the project below, and cite it in a docstring with ``:func:`` /
``:class:`` / ``:obj:`` (or in a page with ``{func}`` etc.). A public alias that the
project's own inventory does not list (``numpyro.infer.Predictive``) gets its own row
pointing at the same anchor. ``tests/test_docs.py`` checks that the tables load as
inventories and that a few links render.

Where the URL patterns come from (checked against each project's docs source on
GitHub, and against published links to those pages):

* Python: ``docs.python.org/3``; ``library/functions.html#int``,
  ``library/stdtypes.html#str``, ``library/constants.html#None``,
  ``glossary.html#term-...`` (the targets numpydoc's default type aliases use).
* NumPy: ``numpy.org/doc/stable``; autosummary pages under
  ``reference/generated/<name>.html``, the glossary term ``array_like``.
* SciPy: ``docs.scipy.org/doc/scipy``; ``reference/generated/<name>.html``.
* JAX: ``docs.jax.dev/en/latest``; ``docs/jax.rst``, ``jax.random.rst``,
  ``jax.lax.rst``, ``jax.typing.rst``, ``jax.distributed.rst`` list their members
  with ``autosummary :toctree: _autosummary`` (so ``_autosummary/<name>.html``);
  ``jax.sharding.rst`` documents its classes with ``autoclass`` on its own page, and
  every ``jax.<mod>.rst`` starts with ``automodule`` (anchor ``module-<name>``).
  ``jax.default_matmul_precision`` is a config ``State`` object, rendered as data.
* NumPyro: ``num.pyro.ai/en/stable``; ``docs/source/utilities.rst``
  (``autoclass:: numpyro.infer.util.Predictive``, ``autofunction::
  numpyro.infer.util.log_likelihood``), ``mcmc.rst`` (``numpyro.infer.mcmc.MCMC``
  with members), ``distributions.rst``
  (``numpyro.distributions.distribution.Distribution``), ``handlers.rst``.
* ArviZ 0.x: the current ArviZ site documents arviz 1.x and redirects the 0.x API
  pages away, so the 0.x objects link to the pinned ``python.arviz.org/en/v0.23.4``
  (the last 0.x release; ``doc/source/api/*.rst`` of tag v0.23.4 use
  ``autosummary :toctree: generated/``, so ``api/generated/arviz.<name>.html``).
* arviz-stats (ArviZ 1.x): ``python.arviz.org/projects/stats/en/stable``;
  ``docs/source/api/index.md`` (``autosummary :toctree: generated/``).
* xarray: ``docs.xarray.dev/en/stable``; ``generated/xarray.<name>.html``.
* Matplotlib: ``matplotlib.org/stable``; ``doc/api/axes_api.rst`` (``autosummary
  :toctree: _as_gen`` for ``Axes``), the label ``colors_def`` of
  ``galleries/users_explain/colors/colors.py`` (page
  ``users/explain/colors/colors.html``).

None of these was fetched from the live sites (no network here): a renamed page
upstream is caught only by following the links, not by the build.
"""

from __future__ import annotations

import pathlib
import zlib
from typing import NamedTuple


class Project(NamedTuple):
    """One external documentation site and the objects of it that we cite."""

    title: str  #: shown in the link's tooltip, "(in <title> v<version>)"
    base_url: str  #: the site's root; each entry's uri is relative to it
    version: str  #: "" where the link follows the site's current release
    objects: tuple[tuple[str, str, str], ...]  #: (domain:type, name, uri[#anchor])


def _auto(
    kind: str, *names: str, page: str = "{}.html"
) -> tuple[tuple[str, str, str], ...]:
    """Rows for names documented on a page of their own, anchored at the full name."""
    return tuple((kind, n, page.format(n) + "#" + n) for n in names)


PROJECTS: dict[str, Project] = {
    "python": Project(
        "Python",
        "https://docs.python.org/3/",
        "",
        (
            ("py:data", "None", "library/constants.html#None"),
            ("py:data", "True", "library/constants.html#True"),
            ("py:data", "False", "library/constants.html#False"),
            ("py:class", "bool", "library/functions.html#bool"),
            ("py:class", "int", "library/functions.html#int"),
            ("py:class", "float", "library/functions.html#float"),
            ("py:class", "str", "library/stdtypes.html#str"),
            ("py:class", "tuple", "library/stdtypes.html#tuple"),
            ("py:class", "list", "library/stdtypes.html#list"),
            ("py:class", "dict", "library/stdtypes.html#dict"),
            ("py:function", "callable", "library/functions.html#callable"),
            ("py:class", "typing.NamedTuple", "library/typing.html#typing.NamedTuple"),
            ("py:class", "typing.Protocol", "library/typing.html#typing.Protocol"),
            ("py:exception", "ValueError", "library/exceptions.html#ValueError"),
            ("py:exception", "TypeError", "library/exceptions.html#TypeError"),
            (
                "py:exception",
                "FileNotFoundError",
                "library/exceptions.html#FileNotFoundError",
            ),
            ("py:exception", "UserWarning", "library/exceptions.html#UserWarning"),
            # numpydoc's default aliases: bool -> this label, sequence etc. -> terms.
            (
                "std:label",
                "bltin-boolean-values",
                "library/stdtypes.html#bltin-boolean-values",
            ),
            ("std:term", "sequence", "glossary.html#term-sequence"),
            ("std:term", "iterable", "glossary.html#term-iterable"),
            ("std:term", "generator", "glossary.html#term-generator"),
            ("std:term", "mapping", "glossary.html#term-mapping"),
            ("std:term", "path-like object", "glossary.html#term-path-like-object"),
        ),
    ),
    "numpy": Project(
        "NumPy",
        "https://numpy.org/doc/stable/",
        "",
        (
            *_auto(
                "py:class",
                "numpy.ndarray",
                "numpy.dtype",
                page="reference/generated/{}.html",
            ),
            *_auto("py:function", "numpy.histogram", page="reference/generated/{}.html"),
            # numpydoc's default alias of "array_like" / "array-like".
            ("std:term", "array_like", "glossary.html#term-array_like"),
            ("std:doc", "index", "index.html"),
        ),
    ),
    "scipy": Project(
        "SciPy",
        "https://docs.scipy.org/doc/scipy/",
        "",
        (
            *_auto(
                "py:function",
                "scipy.optimize.isotonic_regression",
                page="reference/generated/{}.html",
            ),
            ("std:doc", "index", "index.html"),
        ),
    ),
    "jax": Project(
        "JAX",
        "https://docs.jax.dev/en/latest/",
        "",
        (
            *_auto("py:class", "jax.Array", page="_autosummary/{}.html"),
            *_auto(
                "py:function",
                "jax.jit",
                "jax.vmap",
                "jax.grad",
                "jax.jvp",
                "jax.pure_callback",
                "jax.device_put",
                "jax.devices",
                "jax.make_array_from_process_local_data",
                "jax.random.key",
                "jax.random.PRNGKey",
                "jax.numpy.sort",
                "jax.lax.platform_dependent",
                "jax.distributed.initialize",
                page="_autosummary/{}.html",
            ),
            *_auto(
                "py:data",
                "jax.default_matmul_precision",
                "jax.typing.ArrayLike",
                page="_autosummary/{}.html",
            ),
            ("py:module", "jax.numpy", "jax.numpy.html#module-jax.numpy"),
            ("py:module", "jax.random", "jax.random.html#module-jax.random"),
            ("py:module", "jax.distributed", "jax.distributed.html#module-jax.distributed"),
            ("py:module", "jax.sharding", "jax.sharding.html#module-jax.sharding"),
            *_auto(
                "py:class",
                "jax.sharding.NamedSharding",
                "jax.sharding.Mesh",
                "jax.sharding.PartitionSpec",
                page="jax.sharding.html",
            ),
            ("std:doc", "index", "index.html"),
            ("std:doc", "installation", "installation.html"),
        ),
    ),
    "numpyro": Project(
        "NumPyro",
        "https://num.pyro.ai/en/stable/",
        "",
        (
            (
                "py:class",
                "numpyro.infer.util.Predictive",
                "utilities.html#numpyro.infer.util.Predictive",
            ),
            # the public import path, not in NumPyro's own inventory: same anchor
            (
                "py:class",
                "numpyro.infer.Predictive",
                "utilities.html#numpyro.infer.util.Predictive",
            ),
            (
                "py:function",
                "numpyro.infer.util.log_likelihood",
                "utilities.html#numpyro.infer.util.log_likelihood",
            ),
            (
                "py:function",
                "numpyro.infer.log_likelihood",
                "utilities.html#numpyro.infer.util.log_likelihood",
            ),
            ("py:class", "numpyro.infer.mcmc.MCMC", "mcmc.html#numpyro.infer.mcmc.MCMC"),
            ("py:class", "numpyro.infer.MCMC", "mcmc.html#numpyro.infer.mcmc.MCMC"),
            (
                "py:method",
                "numpyro.infer.mcmc.MCMC.get_samples",
                "mcmc.html#numpyro.infer.mcmc.MCMC.get_samples",
            ),
            (
                "py:class",
                "numpyro.distributions.distribution.Distribution",
                "distributions.html#numpyro.distributions.distribution.Distribution",
            ),
            (
                "py:class",
                "numpyro.distributions.Distribution",
                "distributions.html#numpyro.distributions.distribution.Distribution",
            ),
            (
                "py:property",
                "numpyro.distributions.distribution.Distribution.batch_shape",
                "distributions.html#numpyro.distributions.distribution.Distribution.batch_shape",
            ),
            (
                "py:class",
                "numpyro.handlers.substitute",
                "handlers.html#numpyro.handlers.substitute",
            ),
            ("std:doc", "index", "index.html"),
        ),
    ),
    "arviz": Project(
        "ArviZ",
        "https://python.arviz.org/en/v0.23.4/",
        "0.23.4",
        (
            *_auto("py:class", "arviz.InferenceData", page="api/generated/{}.html"),
            *_auto(
                "py:function",
                "arviz.loo",
                "arviz.loo_pit",
                "arviz.psislw",
                "arviz.from_numpyro",
                "arviz.from_dict",
                "arviz.from_cmdstanpy",
                page="api/generated/{}.html",
            ),
            ("std:doc", "index", "index.html"),
        ),
    ),
    "arviz_stats": Project(
        "arviz-stats",
        "https://python.arviz.org/projects/stats/en/stable/",
        "",
        (*_auto("py:function", "arviz_stats.loo_pit", page="api/generated/{}.html"),),
    ),
    "xarray": Project(
        "xarray",
        "https://docs.xarray.dev/en/stable/",
        "",
        (
            *_auto(
                "py:class",
                "xarray.DataArray",
                "xarray.Dataset",
                "xarray.DataTree",
                page="generated/{}.html",
            ),
            ("std:doc", "index", "index.html"),
        ),
    ),
    "matplotlib": Project(
        "Matplotlib",
        "https://matplotlib.org/stable/",
        "",
        (
            *_auto("py:class", "matplotlib.axes.Axes", page="api/_as_gen/{}.html"),
            ("std:label", "colors_def", "users/explain/colors/colors.html#colors-def"),
            ("std:doc", "index", "index.html"),
        ),
    ),
}

# The top-level packages of the objects above: docs/conf.py makes an unresolved
# reference to any of them fail the build (nitpicky).
PY_PACKAGES = (
    "typing",
    "numpy",
    "scipy",
    "jax",
    "numpyro",
    "arviz",
    "arviz_stats",
    "xarray",
    "matplotlib",
)

# Link texts of the non-Python entries (a ``{external+jax:doc}`installation``` without
# an explicit title shows this). Python objects show their own name.
_DISPLAY_NAMES = {
    ("python", "bltin-boolean-values"): "Boolean Type - bool",
    ("matplotlib", "colors_def"): "Specifying colors",
    ("jax", "installation"): "Installation",
}


def inventory_bytes(key: str, project: Project) -> bytes:
    """The ``objects.inv`` (format version 2) of one project's table."""
    lines = []
    for kind, name, uri in project.objects:
        if kind == "std:doc" and name == "index":
            display = f"{project.title} documentation"
        else:
            display = _DISPLAY_NAMES.get((key, name), "-")
        priority = 1 if kind.startswith("py:") else -1
        lines.append(f"{name} {kind} {priority} {uri} {display}\n")
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project.title}\n"
        f"# Version: {project.version}\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    return header.encode() + zlib.compress("".join(lines).encode(), 9)


def intersphinx_mapping(outdir: pathlib.Path) -> dict[str, tuple[str, str]]:
    """Write every project's inventory under ``outdir``; the ``intersphinx_mapping``.

    A file is rewritten only when its table changed, so that intersphinx's cache of
    the inventories (refreshed when the file is newer) stays valid between builds.
    """
    outdir.mkdir(parents=True, exist_ok=True)
    mapping = {}
    for key, project in PROJECTS.items():
        path = outdir / f"{key}.inv"
        data = inventory_bytes(key, project)
        if not path.is_file() or path.read_bytes() != data:
            path.write_bytes(data)
        mapping[key] = (project.base_url, str(path))
    return mapping
