"""One defence against forged role boundaries, applied wherever untrusted text enters a prompt.

Chat templates mark turns with special strings (``<|im_start|>``, ``[INST]``, ``<start_of_turn>``, ...). Text that
contains them could close the user's turn and open a fake system or assistant turn. :func:`sanitize` removes
them - tolerant of case, inner spaces and split-up brackets - from the question, every history turn, summaries,
memories and retrieved passages alike, so a payload split across turns or hidden in a document meets the same
filter as a single-turn one.
"""

from __future__ import annotations

import re

_ROLES = r"(?:system|user|assistant|human|ai|bot|model|tool|function|ipython|developer)"
_PATTERNS = [
    # <|im_start|>, <|im_end|>, <|user|>, <|eot_id|>, <|start_header_id|>, <|endoftext|>, <｜Assistant｜> ...
    r"<\s*[|｜]\s*[\w.\-\s]{1,40}?\s*[|｜]\s*>",
    # [INST] [/INST] <<SYS>> <</SYS>>
    r"\[\s*/?\s*inst\s*\]",
    r"<<\s*/?\s*sys\s*>>",
    # Gemma: <start_of_turn>user / <end_of_turn>
    r"<\s*/?\s*(?:start|end)_of_turn\s*>",
    # <s>, </s>, <bos>, <eos>, <pad>
    r"<\s*/?\s*(?:s|bos|eos|pad|eot)\s*>",
    # role tags written as XML-ish markers: <system>, </assistant>, <|system>, <system|> (not List<User> in code)
    rf"(?<!\w)<\s*/?\s*\|?\s*{_ROLES}\s*\|?\s*>",
    # "### System:" / "### Assistant:" style markers at a line start
    rf"^\s*#{{2,}}\s*{_ROLES}\s*:",
]
_BOUNDARY = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)
_CONTEXT_FENCE = re.compile(r"<<<\s*(?:END\s+)?CONTEXT\s*>>>", re.IGNORECASE)
# zero-width characters that could hide a token from the patterns (ZWSP, ZWNJ, ZWJ, word joiner, BOM, SHY)
_INVISIBLE = dict.fromkeys([0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD])
# full-width ASCII and small angle brackets fold to ASCII one character for one, for matching only
_FOLD = {**{cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}, 0xFE64: ord("<"), 0xFE65: ord(">")}


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
