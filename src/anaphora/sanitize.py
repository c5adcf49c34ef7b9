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


# Spaces tolerated inside a token: a few. Unbounded "\s*" next to each other backtracks quadratically on a long run
# of spaces ("<" and 16k spaces took a minute); a tokenizer reads a token only when written exactly anyway.
_WS = r"\s{0,8}"


def tolerant(token: str) -> str:
    """A pattern for ``token`` that allows spaces around its punctuation (``< | im_start | >``)."""
    parts = [re.escape(c) if c.isalnum() else f"{_WS}{re.escape(c)}{_WS}" for c in token.translate(_FOLD)]
    return "".join(parts).removeprefix(_WS).removesuffix(_WS).replace(_WS + _WS, _WS)


_ROLES = "|".join(ROLE_NAMES)
_SHAPES = [
    # any pipe-bracket token, listed or not: <|im_start|>, <|eot_id|>, <| tool_sep |>, <｜Assistant｜> ...
    rf"<{_WS}\|{_WS}[\w.\-\s]{{1,40}}?{_WS}\|{_WS}>",
    # closing role tags, even glued to a word (evil</system>): code never writes "</user>"
    rf"<{_WS}/{_WS}\|?{_WS}(?:{_ROLES}){_WS}\|?{_WS}>",
    # opening role tags: <system>, <|assistant>, <user|>; glued to a word only when lower-case, so that code
    # generics like List<User> stay
    rf"(?<!\w)<{_WS}\|?{_WS}(?:{_ROLES}){_WS}\|?{_WS}>",
    rf"(?<=\w)<{_WS}\|?{_WS}(?-i:{_ROLES}){_WS}\|?{_WS}>",
    # "### System:" / "### Assistant:" style markers at a line start
    rf"^[ \t]{{0,8}}#{{2,}}{_WS}(?:{_ROLES}){_WS}:",
]
_BOUNDARY = re.compile(
    "|".join(f"(?:{p})" for p in [*(tolerant(t) for t in all_tokens()), *_SHAPES]), re.IGNORECASE | re.MULTILINE
)
FENCE_NAMES = ("CONTEXT", "MEMORY")  # the prompt's own blocks (pipeline/prompt.py): <<<CONTEXT>>>, <<<END MEMORY>>>
_FENCE = re.compile(rf"<<<{_WS}(?:END\s{{1,8}})?(?:{'|'.join(FENCE_NAMES)}){_WS}>>>", re.IGNORECASE)
# the prompt's own labels (pipeline/prompt.py), like its fences wherever they are: "Question:" says where the
# user's question begins, so a passage or a memory must not be able to start a second one (nor a fake summary or
# profile). Prose loses the word before a colon ("the FAQ's Question: field"), a small price.
LABELS = ("Question", "Summary of the earlier conversation", "What you know about the user from earlier conversations")
_LABEL = re.compile(rf"\b(?:{'|'.join(LABELS)}){_WS}:", re.IGNORECASE)


MAX_PASSES = 8  # real text needs one or two; each further pass means tokens were nested inside tokens
_OPENERS = dict.fromkeys(map(ord, "<[＜［﹤"), " ")


def _strip_once(text: str) -> str:
    folded = text.translate(_FOLD)  # same length as text, so match spans index both
    # every token and fence needs one of "<[#", every label a ":": most passages and questions stop here, cheaply
    patterns = (_BOUNDARY, _FENCE) if "<" in folded or "[" in folded or "#" in folded else ()
    patterns += (_LABEL,) if ":" in folded else ()
    spans = [m.span() for pattern in patterns for m in pattern.finditer(folded)]
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
    """Strip role-boundary tokens, our own prompt fences (context and memory) and the prompt's labels
    ("Question:") from untrusted text; repeat until stable.

    Everything else is left as written (no Unicode normalisation of the content), except zero-width characters.
    """
    if not text:
        return ""
    cleaned = text.translate(_INVISIBLE)
    for _ in range(MAX_PASSES):
        next_text = _strip_once(cleaned)
        if next_text == cleaned:
            return cleaned
        cleaned = next_text
    # Tokens nested in tokens ("<|a<|a ... |>|>"): each pass only uncovers the next layer, so finishing would cost
    # one pass per layer (quadratic: a minute for 16k characters). Such text is an attack, not prose: every token
    # and fence needs a "<" or a "[", so those go (and their look-alikes), and one last pass takes the "###" markers.
    return _strip_once(cleaned.translate(_OPENERS))


def speaker_line(speaker: str, text: str) -> str:
    """One turn of a plain-text transcript (for the rewriter and the summarizer): ``User: "..."``, the text
    quoted as a JSON string, so that none of its lines can pose as another speaker's label (a newline in it is
    written ``\\n``, a quote ``\\"``)."""
    return f"{speaker}: {json.dumps(text, ensure_ascii=False)}"
