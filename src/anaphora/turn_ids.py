"""How a stored turn is named outside the store: as a Responses API response id (``resp_{conversation}_{index}``)
or as ``{conversation}:{index}`` (the conversation id and the 0-based turn index, as the conversations API gives
them). The service, the page and the CLI name the answers readers vote on this way."""

from __future__ import annotations

import re

from anaphora.errors import InputError

_RESPONSE_ID = re.compile(r"resp_(.+)_(\d{1,9})")
_TURN_REF = re.compile(r"([^:/\s]+)[:/](\d{1,9})")


def response_id(conversation_id: str, index: int) -> str:
    return f"resp_{conversation_id}_{index}"


def parse_response_id(value: str) -> tuple[str, int] | None:
    """(conversation id, turn index) of a stored response's id; None for any other string."""
    found = _RESPONSE_ID.fullmatch(value)
    return (found.group(1), int(found.group(2))) if found else None


def parse_turn_ref(value: str) -> tuple[str, int]:
    """(conversation id, turn index) of ``CONVERSATION:INDEX`` or a response id; an :class:`InputError` saying
    both forms otherwise."""
    found = parse_response_id(value.strip())
    if found is not None:
        return found
    match = _TURN_REF.fullmatch(value.strip())
    if match is None:
        raise InputError(
            f"{value!r} names no turn",
            hint="give CONVERSATION:INDEX (the conversation id and the turn's 0-based index, as `anaphora "
            "conversations show` lists them) or a response id (resp_...)",
            param="turn",
        )
    return match.group(1), int(match.group(2))
