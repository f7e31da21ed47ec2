"""JAX's persistent compilation cache, switched on by one documented call.

Nothing here runs at import: :func:`enable_compilation_cache` changes JAX's
configuration only when a user (or the command line) calls it.

Concurrent writers. JAX (0.4.38 to 0.10.2 at least) writes a cache entry in place
(``Path.write_bytes`` after an ``exists()`` check, ``jax/_src/lru_cache.py``); only
with ``jax_compilation_cache_max_size`` set does it take a lock, which needs the
``filelock`` package, and even then a writer killed mid-write leaves a truncated
entry that JAX never rewrites (it warns "incomplete or truncated stream" and
recompiles, in every later process). With ``concurrent=True`` JAX writes into a
private staging folder inside the cache directory instead, pre-filled with hard links
to the shared entries (so every shared entry is a hit), and at exit each new entry is
published into the shared directory with ``os.link``: atomic, and never replacing an
entry another process published first. A reader of the shared directory therefore
only ever sees complete entries.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

from bayescal._src.warn import warn

__all__ = ["default_cache_dir", "enable_compilation_cache"]

_ENTRY_SUFFIX = "-cache"  # jax/_src/lru_cache.py's _CACHE_SUFFIX
_STAGING = ".staging"
# A staging folder left by a process that was killed is removed by a later call after
# this long (or at once when its process is known to be gone on this host).
_STALE_SECS = 24 * 3600

_lock = threading.Lock()
_state: dict[str, object] = {
    "dir": None,
    "staging": None,
    "atexit": False,
    "xla": None,
    "adopted": False,  # True when "dir" is a directory the user had configured for JAX
}


def default_cache_dir() -> Path:
    """The user's cache folder for bayescal's compiled programs.

    ``$XDG_CACHE_HOME/bayescal/jax`` (``~/.cache/bayescal/jax`` when unset) on Linux and
    other POSIX systems, ``~/Library/Caches/bayescal/jax`` on macOS and
    ``%LOCALAPPDATA%\\bayescal\\jax`` on Windows.
    """
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        local = os.environ.get("LOCALAPPDATA")
        base = Path(local) if local else Path.home() / "AppData" / "Local"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        # the XDG spec: a relative path is invalid and ignored
        base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "bayescal" / "jax"


def enable_compilation_cache(
    path: str | os.PathLike[str] | None = None, *, concurrent: bool = False
) -> Path:
    """Switch on JAX's persistent compilation cache, so that a new process reuses programs.

    Compiling is most of the time of a first call (50-300 ms per bayescal function)
    and a new Python process compiles again; with the cache on, a later process loads
    the compiled programs from disk instead. bayescal never changes JAX's configuration
    on import: only this call does, and it sets three JAX options, process-wide:
    ``jax_compilation_cache_dir``, ``jax_persistent_cache_min_compile_time_secs``
    (to 0, so bayescal's quick compilations are cached too; JAX's default is 1 s) and
    ``jax_persistent_cache_min_entry_size_bytes`` (lowered to 0 if it was higher).
    It may be called after programs were compiled: later compilations use the cache.

    Parameters
    ----------
    path : str or path-like, optional
        Cache directory, created if missing. ``None`` keeps a directory already
        configured for JAX (``JAX_COMPILATION_CACHE_DIR`` or
        ``jax.config.update("jax_compilation_cache_dir", ...)``) and otherwise uses
        the user's cache folder: ``$XDG_CACHE_HOME/bayescal/jax`` (default
        ``~/.cache/bayescal/jax``), ``~/Library/Caches/bayescal/jax`` on macOS,
        ``%LOCALAPPDATA%\\bayescal\\jax`` on Windows. An explicit ``path`` different
        from a directory configured for JAX before replaces it, with a warning.
    concurrent : bool, default False
        Set it when several processes use ``path`` at the same time (parallel jobs,
        test workers). JAX writes cache entries in place, so a process reading an
        entry while another writes it, or a writer killed mid-write, can leave a
        truncated entry (JAX then warns and recompiles that program every time). With
        ``concurrent=True`` this process writes into a private folder inside ``path``
        and publishes its new entries into ``path`` atomically when it exits: other
        processes see them after that. Requires hard links on the cache's file
        system (otherwise a warning says the writes are unprotected) and no
        ``jax_compilation_cache_max_size``; switches off XLA's GPU autotuning cache
        (``jax_persistent_cache_enable_xla_caches``), whose folder path JAX puts in
        every cache key.

    Returns
    -------
    pathlib.Path
        The cache directory used (absolute).

    Raises
    ------
    TypeError
        If ``path`` is not a string or path-like.
    ValueError
        If ``concurrent=True`` while ``jax_compilation_cache_max_size`` is set.

    Notes
    -----
    Compiled programs depend on the JAX and jaxlib versions, the backend and the flags;
    JAX puts them all in the key, so one directory serves several environments. A
    cache directory is trusted code: do not share one with users you do not trust
    (JAX's warning). The command line (``bayescal demo``, ``bayescal evaluate``) calls
    this function with ``concurrent=True`` unless given ``--no-cache``.

    Examples
    --------
    >>> import tempfile
    >>> import bayescal
    >>> folder = tempfile.mkdtemp()
    >>> bayescal.enable_compilation_cache(folder) == Path(folder).resolve()
    True
    >>> import jax
    >>> jax.config.jax_persistent_cache_min_compile_time_secs
    0.0
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a string or path-like (a cache directory), got "
            f"{type(path).__name__}; pass None for the default folder."
        )
    if not isinstance(concurrent, bool):
        raise TypeError(f"concurrent must be True or False, got {concurrent!r}.")
    import jax

    with _lock:
        configured = jax.config.jax_compilation_cache_dir or None
        ours = configured is not None and configured in (_state["dir"], _state["staging"])
        adopt = False
        if path is None:
            if configured is None:
                target = default_cache_dir()
            elif ours:
                target = Path(str(_state["dir"]))
            else:
                target, adopt = Path(configured), True
        else:
            target = Path(os.fspath(path)).expanduser().resolve()
            # the directory the user chose for JAX, if one is in use now
            if configured is None or (ours and not _state["adopted"]):
                theirs = None
            else:
                theirs = Path(str(_state["dir"]) if ours else configured)
            if theirs is not None and theirs.expanduser().resolve() != target:
                warn(
                    f"bayescal.enable_compilation_cache: JAX's compilation cache "
                    f"directory was {theirs}; now {target}.",
                    UserWarning,
                )
        target = target.expanduser().resolve()
        if concurrent and jax.config.jax_compilation_cache_max_size != -1:
            raise ValueError(
                "concurrent=True does not work with jax_compilation_cache_max_size set "
                f"(got {jax.config.jax_compilation_cache_max_size}): JAX's eviction "
                "needs the staging folder's entries to have access-time files. Reset "
                "it to -1 or call enable_compilation_cache(concurrent=False)."
            )
        if (
            str(target) == _state["dir"]
            and (_state["staging"] is not None) == concurrent
            and configured in (_state["dir"], _state["staging"])
        ):
            _lower_thresholds(jax)
            return target  # already on, as asked
        target.mkdir(parents=True, exist_ok=True)
        _publish_staging()
        jax_dir = str(target)
        if _state["xla"] is not None:  # undo a concurrent call's change
            jax.config.update("jax_persistent_cache_enable_xla_caches", _state["xla"])
            _state["xla"] = None
        if concurrent:
            staging = _new_staging(target)
            if staging is not None:
                jax_dir = str(staging)
                _state["staging"] = jax_dir
                # JAX puts XLA's GPU autotuning cache in the cache directory and that
                # folder's path into every key: a per-process folder would make every
                # key new. Off in this mode (JAX's option, restored by a later
                # concurrent=False call).
                _state["xla"] = jax.config.jax_persistent_cache_enable_xla_caches
                jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
        jax.config.update("jax_compilation_cache_dir", jax_dir)
        _lower_thresholds(jax)
        if str(target) != _state["dir"]:
            _state["adopted"] = adopt
        _state["dir"] = str(target)
        # JAX opens its cache once, at the first compilation (jax 0.4.38 marks it open
        # even when no directory was set then): start over so the next compilation
        # uses this directory. Public in both versions, under jax.experimental.
        from jax.experimental.compilation_cache import compilation_cache as _cc

        _cc.reset_cache()
        return target


def _lower_thresholds(jax) -> None:
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if jax.config.jax_persistent_cache_min_entry_size_bytes > 0:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _new_staging(target: Path) -> Path | None:
    """A private folder in ``target/.staging`` holding hard links to every entry."""
    root = target / _STAGING
    root.mkdir(exist_ok=True)
    _remove_stale(root)
    staging = Path(
        tempfile.mkdtemp(prefix=f"{socket.gethostname()}-{os.getpid()}-", dir=root)
    )
    try:
        with os.scandir(target) as entries:
            for entry in entries:
                if entry.name.endswith(_ENTRY_SUFFIX) and entry.is_file():
                    try:
                        os.link(entry.path, staging / entry.name)
                    except FileExistsError:
                        pass
    except OSError as err:
        shutil.rmtree(staging, ignore_errors=True)
        warn(
            f"bayescal.enable_compilation_cache(concurrent=True): no hard links in "
            f"{target} ({err}); JAX writes its entries there directly, unprotected "
            "from concurrent writers.",
            UserWarning,
        )
        return None
    if not _state["atexit"]:
        atexit.register(_publish_at_exit)
        _state["atexit"] = True
    return staging


def _remove_stale(root: Path) -> None:
    """Remove staging folders of processes that are gone (killed before publishing)."""
    host = socket.gethostname()
    now = time.time()
    with os.scandir(root) as folders:
        for folder in folders:
            stale = False
            name_host, _, rest = folder.name.rpartition("-")[0].rpartition("-")
            pid = rest if name_host else ""
            try:
                stale = now - folder.stat().st_mtime > _STALE_SECS
            except OSError:
                continue
            if not stale and os.name == "posix" and name_host == host and pid.isdigit():
                try:
                    os.kill(int(pid), 0)  # signal 0: only asks whether it exists
                except ProcessLookupError:
                    stale = True
                except OSError:
                    pass
            if stale:
                shutil.rmtree(folder.path, ignore_errors=True)


def _publish_staging() -> None:
    """Publish the staging folder's new entries into the shared directory, remove it."""
    staging, target = _state["staging"], _state["dir"]
    _state["staging"] = None
    if staging is None or target is None:
        return
    staging_path, target_path = Path(str(staging)), Path(str(target))
    try:
        entries = list(os.scandir(staging_path))
    except OSError:
        return
    for entry in entries:
        if not entry.name.endswith(_ENTRY_SUFFIX):
            continue
        try:
            if entry.stat().st_nlink > 1:
                continue  # a link to an entry of the shared directory
            os.link(entry.path, target_path / entry.name)  # atomic, never replaces
        except FileExistsError:
            pass  # another process published the same program first
        except OSError:
            continue
    shutil.rmtree(staging_path, ignore_errors=True)


def _publish_at_exit() -> None:
    with _lock:
        _publish_staging()
