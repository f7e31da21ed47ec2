"""In-process runs of the command line, shared by its test modules."""

import re

from bayescal.cli import main

__all__ = ["assert_one_line_error", "evaluate"]


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
