"""bayescal imports from the folder that contains a clone named ``bayescal``.

Python run from that folder sees the clone's root as a namespace package
``bayescal`` (a folder without ``__init__.py`` on ``sys.path``, as ``''`` is).
Python's own path finder prefers a regular package anywhere on ``sys.path`` to a
namespace portion, but setuptools' editable install of a flat layout used an import
hook placed *after* that finder (``__editable___bayescal_*_finder``), so the
namespace won: ``bayescal.__version__`` raised AttributeError, and
``load_diabetes()`` raised TypeError (``importlib.resources.files("bayescal")`` was a
MultiplexedPath). The fixes, each tested here: pyproject.toml declares the flat
layout (``package-dir = {"" = "."}``), for which setuptools (>= 64, its
``editable_wheel._select_strategy``) writes a .pth holding the clone's path instead
of the hook; and the data files are read through their own regular package,
``importlib.resources.files("bayescal.data")``, so the datasets load even where a
hook is in use.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _clone(tmp_path: pathlib.Path) -> pathlib.Path:
    """``tmp_path/bayescal``: a clone's root (its package folder linked, not copied)."""
    clone = tmp_path / "bayescal"
    clone.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (clone / name).write_bytes((ROOT / name).read_bytes())
    (clone / "bayescal").symlink_to(ROOT / "bayescal", target_is_directory=True)
    return clone


def _run(cwd: pathlib.Path, code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP")}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True
    )


_CHECK = """
import bayescal
from bayescal.datasets import load_breast_cancer, load_diabetes
print(bayescal.__version__, load_diabetes().X.shape, load_breast_cancer().X.shape)
"""


def test_pyproject_declares_the_flat_layout_for_a_path_entry_install():
    # setuptools picks the .pth-with-a-path strategy only for package_dir == {"": ...}
    # with a simple layout (else the import hook); checked with setuptools 84.2.1's
    # build_editable: the wheel holds "__editable__.bayescal-0.1.0.pth" = the clone's
    # path, and no "__editable___bayescal_0_1_0_finder.py".
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert config["tool"]["setuptools"]["package-dir"] == {"": "."}
    assert (ROOT / "bayescal" / "data" / "__init__.py").is_file()


def test_path_entry_install_imports_the_package_from_the_clones_parent(tmp_path):
    # What `pip install -e .` now writes: a .pth holding the clone's path, read by
    # site.addsitedir (as site-packages is at start-up), after '' = the parent folder.
    clone = _clone(tmp_path)
    site = tmp_path / "site"
    site.mkdir()
    (site / "__editable__.bayescal-0.1.0.pth").write_text(f"{clone}\n")
    res = _run(tmp_path, f"import site; site.addsitedir({str(site)!r})\n" + _CHECK)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "0.1.0"
    assert "(442, 10) (569, 30)" in res.stdout


def test_datasets_load_where_the_clone_root_is_the_namespace_package(tmp_path):
    # The old install's situation: `bayescal` is the clone's root (a namespace
    # package) and the submodules come from an import hook after Python's finder, as
    # setuptools' __editable___*_finder does. The datasets still load (they raised
    # TypeError before: resources.files("bayescal") was a MultiplexedPath).
    _clone(tmp_path)
    hook = f"""
import sys
from importlib.machinery import PathFinder
from importlib.util import spec_from_file_location
import pathlib
PKG = pathlib.Path({str(ROOT)!r})
class Hook:  # maps bayescal.* to the package's files, like setuptools' finder
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.split(".")[0] != "bayescal":
            return None
        base = PKG.joinpath(*fullname.split("."))
        if (base / "__init__.py").is_file():
            return spec_from_file_location(fullname, base / "__init__.py",
                                           submodule_search_locations=[str(base)])
        if base.with_suffix(".py").is_file():
            return spec_from_file_location(fullname, base.with_suffix(".py"))
        return None
# the installed package is then not a path entry (a path-entry install of this
# checkout, as `pip install -e .` now writes, would be found first): leave it out
sys.path[:] = [p for p in sys.path
               if not pathlib.Path(p or ".", "bayescal", "__init__.py").is_file()]
sys.meta_path.insert(sys.meta_path.index(PathFinder) + 1, Hook)
import bayescal
assert not hasattr(bayescal, "__file__") or bayescal.__file__ is None, bayescal.__file__
from bayescal.datasets import load_breast_cancer, load_diabetes
print(load_diabetes().X.shape, load_breast_cancer().X.shape)
"""
    res = _run(tmp_path, hook)
    assert res.returncode == 0, res.stderr
    assert "(442, 10) (569, 30)" in res.stdout
