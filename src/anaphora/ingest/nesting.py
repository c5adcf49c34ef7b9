"""Block nesting capped before Markdown is parsed, so a deep line cannot hide the rest of the page.

markdown-it stops parsing a page where block containers (block quotes, list items) nest past its ``maxNesting``
(20 levels): a line behind 100,000 ``>`` made every line after it vanish, and a page of such lines had "no body
text". Documentation nests two or three levels deep; a line whose run of container markers is deeper than
:data:`MAX_DEPTH` keeps its first :data:`MAX_DEPTH` markers and its text.
"""

from __future__ import annotations

import re

MAX_DEPTH = 8  # quote or list markers kept at the start of a line (a list item opens two levels in markdown-it)

_MARKER = r"(?:>|[-*+][ \t]|\d{1,9}[.)][ \t])[ \t]*"
_DEEP = re.compile(rf"^([ \t]*)((?:{_MARKER}){{{MAX_DEPTH + 1},}})", re.MULTILINE)
_ONE = re.compile(_MARKER)


def _shallower(match: re.Match[str]) -> str:
    return match[1] + "".join(_ONE.findall(match[2])[:MAX_DEPTH])


def cap_nesting(text: str) -> str:
    """``text`` with every line's run of block-quote and list markers cut to :data:`MAX_DEPTH`."""
    return _DEEP.sub(_shallower, text)
