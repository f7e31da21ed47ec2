"""Plain-text tables for the command line."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(
    header: Sequence[str], rows: Sequence[Sequence[object]], digits: int = 4
) -> str:
    """A fixed-width text table; floats rounded to ``digits`` significant decimals."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.{digits}f}"
        return str(v)

    cells = [[cell(v) for v in row] for row in rows]
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
