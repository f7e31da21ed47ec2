"""The docs' sources say what the code does (no build needed; the plain test run).

tests/test_docs.py checks the built HTML after ``make docs``; these read the Markdown
sources, so a drift fails the everyday suite: the command-line synopsis of the API
index equals the commands' ``--help`` usage, the FAQ's Python blocks run, the demo's
help names the models it fits, and getting-started lists pyproject.toml's runtime
dependencies.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _fences(text: str, lang: str) -> list[str]:
    """The bodies of the ```lang fenced blocks of a Markdown page, in order."""
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.S | re.M)


def _subcommands() -> dict:
    from bayescal.cli import _build_parser

    parser = _build_parser()
    (sub,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    return dict(sub.choices)


def _words(text: str) -> list[str]:
    # argparse wraps usage lines at the terminal's width (and Python versions differ
    # in where): compare the words, not the line breaks
    return text.split()


def test_cli_synopsis_in_the_api_index_equals_the_help(monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    page = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    section = page[page.index("## Command line") :]
    block = _fences(section, "text")[0]
    documented = [u for u in re.split(r"\n\s*\n", block.strip()) if u.strip()]
    commands = _subcommands()
    assert [u.split()[2] for u in documented] == list(commands), (
        "docs/api/index.md: one usage block per command, in the parser's order"
    )
    for usage, (name, sub) in zip(documented, commands.items(), strict=True):
        assert _words(usage) == _words(sub.format_usage()), (
            f"docs/api/index.md's synopsis of `bayescal {name}` differs from "
            f"`bayescal {name} --help`; paste this:\n{sub.format_usage()}"
        )


def test_faq_python_blocks_run(tmp_path):
    blocks = _fences((DOCS / "faq.md").read_text(encoding="utf-8"), "python")
    assert len(blocks) >= 2  # the 0/1 probabilities and the compilation cache
    # a private home: enable_compilation_cache() with no path writes its default folder
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAX_COMPILATION_CACHE_DIR", "BAYESCAL_CACHE_DIR", "XDG_CACHE_HOME")
    }
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    for i, code in enumerate(blocks):
        res = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, f"docs/faq.md python block {i + 1}:\n{code}\n{res.stderr}"


def test_faq_python_blocks_are_found():
    # the extraction itself: a block that raises is reported (the test can fail)
    code = _fences("x\n```python\nraise SystemExit(3)\n```\n", "python")
    assert code == ["raise SystemExit(3)\n"]
    assert subprocess.run([sys.executable, "-c", code[0]]).returncode == 3


def test_demo_help_names_the_models_it_fits():
    import inspect

    from bayescal._cli import demo

    text = " ".join(_subcommands()["demo"].description.split())
    # the likelihoods of the models in bayescal/_cli/demo.py
    assert "dist.Poisson(" in inspect.getsource(demo._poisson_model)
    assert re.search(r"dist\.Bernoulli\(", inspect.getsource(demo._logistic_model))
    assert "Poisson regression to the diabetes data" in text
    assert "logistic regression to the breast-cancer data" in text
    assert "linear regression" not in text


@pytest.mark.parametrize("page", ["getting-started.md", "install.md"])
def test_pages_list_the_runtime_dependencies(page):
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    names = [re.split(r"[<>=!~ \[]", d, maxsplit=1)[0] for d in config["project"]["dependencies"]]
    text = (DOCS / page).read_text(encoding="utf-8")
    if page == "getting-started.md":
        text = text[text.index("Runtime dependencies") :].split("\n\n")[0]
    missing = [n for n in names if not re.search(rf"\b{re.escape(n)}\b", text)]
    assert not missing, f"docs/{page} does not name the runtime dependencies {missing}"
