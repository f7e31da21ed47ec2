"""The package's layers (DESIGN.md, "Layout"; the issue "One library", item 3).

``bayescal._src`` holds only what both branches use: no module of it imports
``bayescal.classification`` or ``bayescal.regression``, at the top or inside a
function (a NumPy twin lives beside its kernel, in its method's module). The
branches never import each other, and no module of the package takes part in an import
circle. Checked on the source (every ``import`` statement
the parser finds), so a lazy import inside a function body counts too.
"""

from __future__ import annotations

import ast
import pathlib
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "bayescal"


def _imports(path: pathlib.Path, root: pathlib.Path = PACKAGE.parent) -> set[str]:
    """Every module an ``import`` or ``from ... import`` of ``path`` names (absolute;
    ``root`` is the folder that holds the package)."""
    parts = path.relative_to(root).with_suffix("").parts
    package = parts[:-1] if parts[-1] != "__init__" else parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ((node.module,) if node.module else ()))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def _modules(folder: str) -> list[pathlib.Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _modules("_src"), ids=lambda p: p.name)
def test_src_imports_no_branch(path):
    bad = sorted(
        m
        for m in _imports(path)
        if m.startswith(("bayescal.classification", "bayescal.regression"))
    )
    assert not bad, f"bayescal/_src/{path.name} imports a branch: {bad}"


@pytest.mark.parametrize(
    ("branch", "other"),
    [("classification", "regression"), ("regression", "classification")],
)
def test_branches_do_not_import_each_other(branch, other):
    bad = {
        p.name: sorted(m for m in _imports(p) if m.startswith(f"bayescal.{other}"))
        for p in _modules(branch)
    }
    assert not {k: v for k, v in bad.items() if v}


def test_the_import_finder_sees_lazy_and_relative_imports(tmp_path):
    # the checks above cannot pass vacuously: a lazy import in a function body and a
    # relative import are both found
    assert "jax" in _imports(PACKAGE / "_src" / "backend.py")
    probe = tmp_path / "bayescal" / "_src" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "def f():\n    from bayescal.regression import _pit\nfrom . import validation\n"
    )
    found = _imports(probe, root=tmp_path)
    assert "bayescal.regression._pit" in found and "bayescal._src.validation" in found


@pytest.mark.parametrize(
    "path", [PACKAGE / "cli.py", *_modules("_cli")], ids=lambda p: p.name
)
def test_the_command_line_imports_no_src_module(path):
    # the command line is built on the public modules (issue "One library", item 3)
    bad = sorted(m for m in _imports(path) if m.startswith("bayescal._src"))
    assert not bad, f"{path.name} imports {bad}"


@pytest.mark.parametrize("name", ["numpyro.py", "arviz.py", "_psis.py"])
def test_the_adapters_import_no_src_module(name):
    # the adapters are built on the public modules and core, as a third party's would
    # be (issue "One library", item 3); core exports the bucketing and input-convention
    # helpers they use (bucket_size, pad_axis, paddable, reject_masked, narrows, warn)
    bad = sorted(m for m in _imports(PACKAGE / name) if m.startswith("bayescal._src"))
    assert not bad, f"{name} imports {bad}"


def _cycles(folder: pathlib.Path) -> list[list[str]]:
    """The import circles among the modules under ``folder`` (strongly connected
    components of more than one module; lazy imports count)."""
    paths = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts): p
        for p in folder.rglob("*.py")
    }
    graph = {}
    for name, path in paths.items():
        deps = set()
        for module in _imports(path, root=PACKAGE.parent):
            while module and module not in paths:  # a name imported from a module
                module = module.rpartition(".")[0]
            if module and module != name:
                deps.add(module)
        graph[name] = deps
    index, low, stack, found = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_src_has_no_import_circle():
    # bucketing <-> validation was one (issue "One library"): paddable and
    # BUCKET_MAX now live in bucketing, which imports nothing of validation
    assert _cycles(PACKAGE / "_src") == []


def test_the_package_has_no_import_circle():
    # each branch's _host.py held the twins of all its modules and imported their
    # calibrator classes and private helpers: circles of 11 classification and 4
    # regression modules (issue "One library"). The twins now live beside their kernels
    # and _host.py holds only shared NumPy arithmetic, importing no module of its branch.
    assert _cycles(PACKAGE) == []


@pytest.mark.parametrize("branch", ["classification", "regression"])
def test_a_branch_host_module_imports_no_module_of_its_branch(branch):
    bad = sorted(
        m for m in _imports(PACKAGE / branch / "_host.py") if m.startswith(f"bayescal.{branch}")
    )
    assert not bad, f"bayescal/{branch}/_host.py imports {bad}"


def test_the_circle_finder_finds_a_lazy_circle(tmp_path, monkeypatch):
    folder = tmp_path / "bayescal" / "_src"
    folder.mkdir(parents=True)
    (folder / "a.py").write_text("from bayescal._src.b import f\n")
    (folder / "b.py").write_text("def f():\n    from bayescal._src import a\n")
    (folder / "c.py").write_text("from bayescal._src.a import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "bayescal")
    assert _cycles(folder) == [["bayescal._src.a", "bayescal._src.b"]]
