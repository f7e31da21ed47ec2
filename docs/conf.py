"""Sphinx configuration for the bayescal docs (myst-nb + numpydoc)."""

import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
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
    "numpydoc",
]

# The tutorials live in ../tutorials; copy them next to the docs sources so myst-nb
# executes and renders them (the copies are build products, ignored by git).
_tut_src = ROOT / "tutorials"
_tut_dst = pathlib.Path(__file__).resolve().parent / "tutorials"
if _tut_src.is_dir():
    _tut_dst.mkdir(exist_ok=True)
    for nb in _tut_src.glob("*.ipynb"):
        shutil.copy2(nb, _tut_dst / nb.name)

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
myst_enable_extensions = ["dollarmath", "amsmath"]

nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True

autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

html_theme = "pydata_sphinx_theme"
html_title = "bayescal"
html_static_path: list[str] = []
suppress_warnings = ["mystnb.unknown_mime_type"]
