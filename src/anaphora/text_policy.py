"""One policy for text that cannot be stored or encoded, applied at every edge (HTTP, CLI, ingestion): reject it.

A Python ``str`` can hold code points that no UTF-8 encoder accepts: unpaired UTF-16 surrogates (U+D800-U+DFFF,
from JSON escapes like ``"\\ud800"`` or from undecodable command-line bytes), and NUL (U+0000), which PostgreSQL
text columns refuse. Passed on, they fail deep inside the pipeline (an embedding-cache key, a stored turn). They
are refused where the text enters instead, naming where it came from, and nothing is stored. Replacing them with
U+FFFD was the alternative; refusing keeps what is stored exactly what the user sent.
"""

from __future__ import annotations

import re

from anaphora.errors import InputError

_UNENCODABLE = re.compile("[\x00\ud800-\udfff]")


def first_invalid(text: str) -> tuple[int, str] | None:
    """(index, code point as U+XXXX) of the first character the policy refuses, or None."""
    match = _UNENCODABLE.search(text)
    if match is None:
        return None
    return match.start(), f"U+{ord(match.group()):04X}"


def describe_invalid(text: str) -> str | None:
    """Why the text is refused, or None when it is fine."""
    found = first_invalid(text)
    if found is None:
        return None
    index, code_point = found
    kind = "a NUL character" if code_point == "U+0000" else f"an unpaired surrogate ({code_point})"
    return f"holds {kind} at character {index}"


def require_valid_text(text: str, where: str) -> str:
    """``text`` unchanged, or :class:`InputError` naming ``where`` when it holds a refused code point."""
    problem = describe_invalid(text)
    if problem is not None:
        raise InputError(
            f"{where} {problem}", hint="send valid Unicode text (UTF-8 without lone surrogates or NUL characters)"
        )
    return text
