"""Tables for the command line and the self-contained HTML report.

A report is a list of sections, each a title, text lines and tables, printed as plain
text (:func:`format_table`) and rendered as one HTML file (:func:`render_html`) whose
figures are embedded as base64 PNG: no external resource (no script, style sheet, font
or image is fetched), so the file can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field

from bayescal._cli.options import shown

#: The longest text line of a section printed whole (a note listing the columns that
#: ``--layout`` ignored holds their names): a longer one is cut, with its length, on
#: the terminal; the report files keep it whole.
LINE_MAX = 1000


@dataclass
class Table:
    """A table: a header, rows of cells, and an optional caption."""

    header: Sequence[str]
    rows: Sequence[Sequence[object]]
    caption: str = ""
    digits: int = 4


@dataclass
class Section:
    """A titled part of the report: text lines, tables and figures (file names)."""

    title: str
    key: str = "main"  # which figures belong here
    lines: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)


def cell(v: object, digits: int = 4) -> str:
    """One cell as text: floats with ``digits`` decimals, None as "-"."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 4
) -> str:
    """A fixed-width text table; floats rounded to ``digits`` decimals."""
    cells = [[cell(v, digits) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(header, widths, strict=True))
    )
    rule = "  ".join("-" * w for w in widths)
    body = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in cells
    ]
    return "\n".join([line, rule, *body])


def format_sections(sections: Sequence[Section]) -> str:
    """The sections as plain text, for the terminal: text lines over :data:`LINE_MAX`
    characters cut, and control characters escaped (see
    :func:`bayescal._cli.options.shown`)."""
    parts = []
    for s in sections:
        block = [f"== {s.title}"] if s.title else []
        for t in s.tables:
            if t.caption:
                block.append(t.caption)
            block.append(format_table(t.header, t.rows, t.digits))
        block.extend(shown(line, LINE_MAX) for line in s.lines)
        parts.append("\n".join(block))
    return "\n\n".join(parts)


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 60em;
       color: #222; line-height: 1.4; padding: 0 1em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.8em;
     border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0 1em; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3em; }
th, td { border: 1px solid #bbb; padding: 0.2em 0.6em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #eee; }
.note { color: #444; }
.caveat { color: #8a4b00; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; vertical-align: top; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
"""


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    rows = []
    for row in t.rows:
        tds = []
        for i, v in enumerate(row):
            cls = ' class="num"' if i else ""  # the first column names the row
            tds.append(f"<td{cls}>{html.escape(cell(v, t.digits))}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    caption = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return (f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


def render_html(
    title: str,
    intro: Sequence[str],
    sections: Sequence[Section],
    images: dict[str, bytes],
) -> str:
    """One self-contained HTML page: tables as HTML tables, figures as base64 PNG.

    ``images`` maps a figure's file name (as listed in a section's ``figures``) to the
    PNG's bytes; a figure absent from it is left out. Lines that begin with
    "caveat:" are set apart.

    Examples
    --------
    >>> page = render_html("r", ["n = 3"], [Section("s", tables=[Table(["a"], [[1.0]])])], {})
    >>> "<table>" in page and "http" not in page
    True
    """
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    out.extend(f"<p>{html.escape(line)}</p>" for line in intro)
    for s in sections:
        if s.title:
            out.append(f"<h2>{html.escape(s.title)}</h2>")
        out.extend(_html_table(t) for t in s.tables)
        for line in s.lines:
            cls = "caveat" if line.startswith("caveat:") else "note"
            out.append(f'<p class="{cls}">{html.escape(line)}</p>')
        for name in s.figures:
            png = images.get(name)
            if png is None:
                continue
            data = base64.b64encode(png).decode("ascii")
            out.append(
                f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(name)}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"
