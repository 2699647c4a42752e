"""Command descriptions: plain paragraphs, wrapped for a terminal (no reST in ``--help``)."""

from __future__ import annotations

import textwrap


def paragraphs(*texts: str, width: int = 78) -> str:
    """Return ``texts`` wrapped to ``width`` columns, separated by blank lines.

    Use with ``formatter_class=argparse.RawDescriptionHelpFormatter``, which keeps them.
    """
    return "\n\n".join(textwrap.fill(text, width) for text in texts)
