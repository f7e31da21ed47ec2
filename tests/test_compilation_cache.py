"""bayescal.enable_compilation_cache and the command line's use of it.

Every test runs in subprocesses with the cache pointed at ``tmp_path`` (never at the
real home cache): enabling the cache changes a process's JAX configuration.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(tmp_path, **extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("JAX_COMPILATION", "JAX_PERSISTENT", "BAYESCAL_"))
    }
    # the default cache folder lands in tmp_path, whatever a test forgets
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _python(code, env, timeout=120):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def _entries(folder):
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.name.endswith("-cache"))


# --- the command line --------------------------------------------------------------


@pytest.fixture
def csv150(tmp_path):
    rng = np.random.default_rng(0)
    loc = rng.normal(size=150)
    y = loc + rng.normal(size=150)
    path = tmp_path / "pred.csv"
    np.savetxt(path, np.column_stack([y, loc, np.ones(150)]), delimiter=",",
               header="y,loc,scale", comments="")
    return path


def _evaluate(csv, out, env, *options):
    return subprocess.run(
        [sys.executable, "-m", "bayescal.cli", "evaluate", str(csv), "--out", str(out),
         "--no-plots", *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )


def test_cli_caches_by_default_in_the_user_cache_folder(tmp_path, csv150):
    env = _env(tmp_path)
    run = _evaluate(csv150, tmp_path / "out1", env)
    assert run.returncode == 0, run.stderr
    folder = tmp_path / "xdg" / "bayescal" / "jax"
    first = _entries(folder)
    assert len(first) >= 3, first
    # published whole: no staging folder left behind
    assert list((folder / ".staging").iterdir()) == []
    # a second run finds every program: it writes nothing new
    run = _evaluate(csv150, tmp_path / "out2", env)
    assert run.returncode == 0, run.stderr
    assert _entries(folder) == first


def test_cli_no_cache_writes_nothing(tmp_path, csv150):
    cache = tmp_path / "cache"
    for options, env in [
        (["--no-cache", "--cache-dir", str(cache)], _env(tmp_path)),
        ([], _env(tmp_path, BAYESCAL_NO_CACHE="1", BAYESCAL_CACHE_DIR=str(cache))),
    ]:
        run = _evaluate(csv150, tmp_path / f"out{len(options)}", env, *options)
        assert run.returncode == 0, run.stderr
        assert not cache.exists()
        assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()


def test_cli_cache_dir_option_and_environment(tmp_path, csv150):
    cache = tmp_path / "from_env"
    run = _evaluate(csv150, tmp_path / "out", _env(tmp_path, BAYESCAL_CACHE_DIR=str(cache)))
    assert run.returncode == 0, run.stderr
    assert _entries(cache)
    assert not (tmp_path / "xdg").exists()


# --- the library function ----------------------------------------------------------

_PROGRAMS = """
import jax, jax.numpy as jnp, numpy as np
import bayescal
from bayescal import regression as R, classification as C

def run(writer):
    # programs every writer compiles (the same keys, written at once by all) ...
    rng = np.random.default_rng(0)
    u = R.pit_normal(rng.normal(size=300), np.zeros(300), np.ones(300))
    float(R.calibration_error(u))
    y = (rng.uniform(size=300) < 0.5).astype(int)
    float(C.expected_calibration_error(y, rng.uniform(size=300)))
    # ... and programs of this writer only
    for k in range(3):
        f = jax.jit(lambda x, k=k, w=writer: jnp.sin(x * (k + 1)) + w)
        f(jnp.arange(10.0 + writer)).block_until_ready()
"""


def test_concurrent_writers_leave_only_whole_entries(tmp_path):
    cache = tmp_path / "shared"
    env = _env(tmp_path)
    writer = _PROGRAMS + textwrap.dedent(
        """
        import sys
        bayescal.enable_compilation_cache(sys.argv[1], concurrent=True)
        run(int(sys.argv[2]))
        """
    )
    start = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", writer, str(cache), str(i)],
            env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for i in range(4)
    ]
    for p in procs:
        _, err = p.communicate(timeout=50)
        assert p.returncode == 0, err
    assert time.monotonic() - start < 60
    entries = _entries(cache)
    assert len(entries) >= 4 * 3 + 3, entries
    # A reader loads every entry: as a JAX program (every compilation a cache hit, no
    # "Error reading persistent compilation cache entry" warning, made an error here)
    # and every file as a whole zstd/zlib frame.
    reader = _PROGRAMS + textwrap.dedent(
        """
        import sys, warnings
        warnings.simplefilter("error")
        events = []
        jax.monitoring.register_event_listener(lambda e, **k: events.append(e))
        bayescal.enable_compilation_cache(sys.argv[1], concurrent=True)
        for w in range(4):
            run(w)
        misses = events.count("/jax/compilation_cache/cache_misses")
        hits = events.count("/jax/compilation_cache/cache_hits")
        from jax._src import compilation_cache as cc
        import pathlib
        for p in pathlib.Path(sys.argv[1]).glob("*-cache"):
            cc.decompress_executable(p.read_bytes())
        print(hits, misses)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", reader, str(cache)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    hits, misses = map(int, run.stdout.split())
    assert misses == 0 and hits >= 4 * 3 + 3, run.stdout
    assert _entries(cache) == entries
    assert list((cache / ".staging").iterdir()) == []


def test_enable_keeps_a_configured_jax_directory_and_warns_on_replacing_it(tmp_path):
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    code = f"""
    import warnings, pathlib, jax
    import bayescal
    import jax.numpy as jnp
    jnp.arange(3.0).block_until_ready()  # a compilation before: must not matter
    assert bayescal.enable_compilation_cache() == pathlib.Path({str(theirs)!r})
    assert jax.config.jax_compilation_cache_dir == {str(theirs)!r}
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    jnp.arange(4.0).block_until_ready()
    assert any(pathlib.Path({str(theirs)!r}).glob("*-cache"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bayescal.enable_compilation_cache({str(mine)!r}) == pathlib.Path({str(mine)!r})
    assert "was {theirs}" in str(caught[0].message), caught
    jnp.arange(5.0).block_until_ready()
    assert any(pathlib.Path({str(mine)!r}).glob("*-cache"))
    for bad in (3, b"x"):
        try:
            bayescal.enable_compilation_cache(bad)
        except TypeError as err:
            assert "path must be a string" in str(err)
        else:
            raise SystemExit("no TypeError")
    print("ok")
    """
    run = _python(code, _env(tmp_path, JAX_COMPILATION_CACHE_DIR=str(theirs)))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_default_folder_follows_the_platform_rules(tmp_path):
    code = """
    import os, pathlib
    from bayescal._src.compilation_cache import default_cache_dir
    print(default_cache_dir())
    os.environ["XDG_CACHE_HOME"] = "relative/ignored"
    print(default_cache_dir())
    """
    run = _python(code, _env(tmp_path))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split()
    if sys.platform.startswith("linux"):
        assert lines == [
            str(tmp_path / "xdg" / "bayescal" / "jax"),
            str(tmp_path / "home" / ".cache" / "bayescal" / "jax"),
        ]
