"""In-process runs of the command line, shared by its test modules."""

import re

import numpy as np

from bayescal.cli import main

__all__ = ["assert_one_line_error", "evaluate", "write_good_csv"]


def evaluate(capsys, *args):
    """Run ``bayescal evaluate`` in-process: (status, stdout, stderr lines)."""
    code = main(["evaluate", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip().splitlines()


def assert_one_line_error(code, err, pattern, prefix="bayescal"):
    """Exit status 2 and one line on stderr (``err``: its lines) that matches ``pattern``."""
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith(prefix), err
    assert "Traceback" not in err[0]
    assert re.search(pattern, err[0]), err[0]


def write_good_csv(path, n=50):
    """A valid ``y,loc,scale`` CSV of ``n`` rows at ``path``: (path, y, loc)."""
    rng = np.random.default_rng(0)
    loc = rng.normal(size=n)
    y = loc + rng.normal(size=n)
    rows = "\n".join(f"{float(a)!r},{float(b)!r},1.0" for a, b in zip(y, loc, strict=True))
    path.write_text("y,loc,scale\n" + rows + "\n")
    return path, y, loc
