"""One defence against forged role boundaries, applied wherever untrusted text enters a prompt.

Chat templates mark turns with special strings (``<|im_start|>``, ``[INST]``, ``<start_of_turn>``, ...). Text that
contains them could close the user's turn and open a fake system or assistant turn. :func:`sanitize` removes
them - tolerant of case, inner spaces, full-width look-alikes and split-up brackets - from the question, every
history turn, summaries, memories and retrieved passages alike, so a payload split across turns or hidden in a
document meets the same filter as a single-turn one. The tokens are data: one table per template family in
:mod:`anaphora.special_tokens`, plus generic shapes for templates not listed there.

What it cannot do: instructions written in plain prose ("ignore the above and ...") contain no token; against
those, only the model's own training and the answer guards help.
"""

from __future__ import annotations

import json
import re

from anaphora.special_tokens import ROLE_NAMES, all_tokens

# full-width ASCII (＜, ｜, ［ ...), small angle brackets and DeepSeek's "▁" fold to ASCII one character for one,
# for matching only: the spans found in the folded text index the original too
_FOLD = {**{cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}, 0xFE64: ord("<"), 0xFE65: ord(">"), 0x2581: ord("_")}
# zero-width characters that could hide a token from the patterns (ZWSP, ZWNJ, ZWJ, word joiner, BOM, SHY)
_INVISIBLE = dict.fromkeys([0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD])


def tolerant(token: str) -> str:
    """A pattern for ``token`` that allows spaces around its punctuation (``< | im_start | >``)."""
    parts = [re.escape(c) if c.isalnum() else rf"\s*{re.escape(c)}\s*" for c in token.translate(_FOLD)]
    return "".join(parts).removeprefix(r"\s*").removesuffix(r"\s*").replace(r"\s*\s*", r"\s*")


_ROLES = "|".join(ROLE_NAMES)
_SHAPES = [
    # any pipe-bracket token, listed or not: <|im_start|>, <|eot_id|>, <| tool_sep |>, <｜Assistant｜> ...
    r"<\s*\|\s*[\w.\-\s]{1,40}?\s*\|\s*>",
    # closing role tags, even glued to a word (evil</system>): code never writes "</user>"
    rf"<\s*/\s*\|?\s*(?:{_ROLES})\s*\|?\s*>",
    # opening role tags: <system>, <|assistant>, <user|>; glued to a word only when lower-case, so that code
    # generics like List<User> stay
    rf"(?<!\w)<\s*\|?\s*(?:{_ROLES})\s*\|?\s*>",
    rf"(?<=\w)<\s*\|?\s*(?-i:{_ROLES})\s*\|?\s*>",
    # "### System:" / "### Assistant:" style markers at a line start
    rf"^\s*#{{2,}}\s*(?:{_ROLES})\s*:",
]
_BOUNDARY = re.compile(
    "|".join(f"(?:{p})" for p in [*(tolerant(t) for t in all_tokens()), *_SHAPES]), re.IGNORECASE | re.MULTILINE
)
_CONTEXT_FENCE = re.compile(r"<<<\s*(?:END\s+)?CONTEXT\s*>>>", re.IGNORECASE)


def _strip_once(text: str) -> str:
    folded = text.translate(_FOLD)  # same length as text, so match spans index both
    if "<" not in folded and "[" not in folded and "#" not in folded:
        return text  # every pattern needs one of these: most passages and questions stop here, cheaply
    spans = [m.span() for pattern in (_BOUNDARY, _CONTEXT_FENCE) for m in pattern.finditer(folded)]
    if not spans:
        return text
    pieces, position = [], 0
    for start, end in sorted(spans):
        if start >= position:
            pieces.append(text[position:start])
            pieces.append(" ")
            position = end
        else:
            position = max(position, end)
    pieces.append(text[position:])
    return "".join(pieces)


def sanitize(text: str) -> str:
    """Strip role-boundary tokens and our own context fences from untrusted text; repeat until stable.

    Everything else is left as written (no Unicode normalisation of the content), except zero-width characters.
    """
    if not text:
        return ""
    cleaned = text.translate(_INVISIBLE)
    while True:
        next_text = _strip_once(cleaned)
        if next_text == cleaned:
            return cleaned
        cleaned = next_text


def speaker_line(speaker: str, text: str) -> str:
    """One turn of a plain-text transcript (for the rewriter and the summarizer): ``User: "..."``, the text
    quoted as a JSON string, so that none of its lines can pose as another speaker's label (a newline in it is
    written ``\\n``, a quote ``\\"``)."""
    return f"{speaker}: {json.dumps(text, ensure_ascii=False)}"
