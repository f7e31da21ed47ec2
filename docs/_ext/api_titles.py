"""Short titles that wrap between words on the API pages (a Sphinx extension).

autosummary titles each object's page with its full dotted name
(``bayescal.regression.fit_isotonic_recalibrator``): too long for the page heading,
which the theme clips, and for the sidebar, where the theme breaks links anywhere
(``crps_draw`` / ``s``). Here the title of every ``api/generated/`` page becomes the
object's own name (the module is in the breadcrumbs and the signature), with a
``<wbr>`` (a line-break opportunity that copies as nothing) after each ``_`` and
``.``: a long name wraps between its words, in the heading and in the sidebar. The
page's ``<title>`` and the search index take the title as text, without the
``<wbr>`` (Sphinx's ``clean_astext`` drops raw nodes).
"""

from __future__ import annotations

import re

from docutils import nodes

PREFIX = "api/generated/"
_BREAK = re.compile(r"(?<=[._])")


def wrappable(name: str) -> list[nodes.Node]:
    """``name`` as text nodes with an HTML ``<wbr>`` after each ``_`` and ``.``."""
    out: list[nodes.Node] = []
    for i, part in enumerate(p for p in _BREAK.split(name) if p):
        if i:
            out.append(nodes.raw("", "<wbr>", format="html"))
        out.append(nodes.Text(part))
    return out


def _shorten(app, doctree) -> None:
    docname = app.env.docname
    if not docname.startswith(PREFIX):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        return
    title = section[0]
    short = title.astext().rsplit(".", 1)[-1]
    del title[:]
    title.extend(wrappable(short))


def setup(app):
    # before Sphinx's TitleCollector (priority 500) reads the title for the toctree
    app.connect("doctree-read", _shorten, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
