"""Type checkers see every public function's signature (issue "One library", item 3:
"Decorators keep signatures").

The public functions are wrapped by ``validation.validated``, ``host.first`` and
``_warns_on_probabilities_as_logits``; a decorator typed ``Callable[..., Any]`` made
mypy see each of them as ``def (*Any, **Any) -> Any`` (every argument name and type
lost for users' editors and checkers). Checked with mypy's ``reveal_type`` on the
package as this tree has it (``mypy_path``), with the ``py.typed`` marker that tells
checkers to read the package's annotations.
"""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re

import mypy.api

from tests._public import PUBLIC_MODULES

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOST = "def (*Any, **Any) -> Any"
SKIPPED = (
    "jax",
    "jaxlib",
    "numpy",
    "scipy",
    "xarray",
    "matplotlib",
    "numpyro",
    "arviz",
    "pandas",
)


def _public_functions() -> list[str]:
    names = []
    for module in PUBLIC_MODULES:
        mod = importlib.import_module(module)
        names += [
            f"{module}.{name}"
            for name in mod.__all__
            if inspect.isfunction(getattr(mod, name))
        ]
    return names


def test_the_package_is_marked_typed():
    assert (ROOT / "bayescal" / "py.typed").is_file()


def test_type_checkers_see_every_public_signature(tmp_path):
    names = _public_functions()
    assert len(names) > 100  # the whole public API, not an empty list
    probe = tmp_path / "probe.py"
    probe.write_text(
        "\n".join(
            [
                "from collections.abc import Callable",
                "from typing import Any",
                *(f"import {m}" for m in PUBLIC_MODULES),
                # the detector's own check: a wrapper typed as the old ones is seen as lost
                "def _untyped(fn: Callable[..., Any]) -> Callable[..., Any]:",
                "    def wrapper(*args: Any, **kwargs: Any) -> Any:",
                "        return fn(*args, **kwargs)",
                "    return wrapper",
                "@_untyped",
                "def lost(x: int) -> int:",
                "    return x",
                "reveal_type(lost)",
                *(f"reveal_type({name})" for name in names),
            ]
        )
        + "\n"
    )
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nmypy_path = {ROOT}\nfollow_imports = silent\nignore_missing_imports = True\n"
        # the libraries' own types are not what is checked: skipped, ~5x quicker
        f"[mypy-{','.join(f'{lib}.*' for lib in SKIPPED)}]\nfollow_imports = skip\n"
    )
    stdout, stderr, _ = mypy.api.run(
        [
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            str(probe),
        ]
    )
    revealed = re.findall(r'Revealed type is "(.*)"', stdout)
    assert len(revealed) == len(names) + 1, stdout[-3000:] + stderr[-3000:]
    assert revealed[0] == LOST
    lost = [name for name, seen in zip(names, revealed[1:], strict=True) if seen == LOST]
    assert not lost, f"type checkers see these as {LOST}: {lost}"
