"""Warnings that point at the user's line, whichever path raised them."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the first frame outside bayescal.

    A fixed ``stacklevel`` points at a different line on each path (a public function
    is reached through its host-path and validation wrappers, or called by another
    public function), e.g. at ``bayescal/_src/host.py``; counting the package's own
    frames (as pandas' ``find_stack_level`` does) always names the caller's line.
    bayescal's adapters warn through it.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type of Warning, default UserWarning
        The warning's class.

    Examples
    --------
    >>> import warnings
    >>> from bayescal.core import warn
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn("check the Pareto k values")
    >>> caught[0].message.args[0], caught[0].category.__name__
    ('check the Pareto k values', 'UserWarning')
    """
    level, frame = 2, sys._getframe(1)  # 1 is this function, 2 its caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level += 1
        frame = frame.f_back
    warnings.warn(message, category, stacklevel=level)
