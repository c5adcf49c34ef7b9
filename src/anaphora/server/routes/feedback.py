"""Votes on answers: thumbs up or down with an optional comment, on a stored turn (``/v1/conversations/{id}/turns/
{index}/feedback``) or on a stored response (``/v1/responses/{id}/feedback``). ``PUT`` casts or changes the caller's
vote (one per answer), ``DELETE`` withdraws it; only the turn's owner can do either, and another user's turn is
reported missing. The vote is read back with the turn (``GET /v1/conversations/{id}``) and erased with the user."""

from __future__ import annotations

from fastapi import APIRouter, Path

from anaphora.errors import NotFoundError, TurnNotFoundError
from anaphora.server.routes.deps import Svc, User
from anaphora.server.schemas import FeedbackDeleted, FeedbackIn, FeedbackOut
from anaphora.store.chains import response_not_found
from anaphora.turn_ids import parse_response_id

router = APIRouter(tags=["feedback"])
TURN = "/v1/conversations/{conversation_id}/turns/{index}/feedback"
RESPONSE = "/v1/responses/{response_id}/feedback"
Index = Path(ge=0, le=999_999_999, description="the turn's 0-based index in the conversation")


def _turn_of(response_id: str) -> tuple[str, int]:
    parsed = parse_response_id(response_id)
    if parsed is None:
        raise response_not_found(response_id)
    return parsed


async def _rate(svc: Svc, user_id: str, conversation_id: str, index: int, body: FeedbackIn) -> FeedbackOut:
    feedback = await svc.components.conversations.rate(user_id, conversation_id, index, body.vote, body.comment)
    return FeedbackOut.of(conversation_id, index, feedback)


async def _unrate(svc: Svc, user_id: str, conversation_id: str, index: int) -> FeedbackDeleted:
    existed = await svc.components.conversations.unrate(user_id, conversation_id, index)
    return FeedbackDeleted(conversation_id=conversation_id, turn_index=index, deleted=existed)


@router.put(TURN, response_model=FeedbackOut, summary="Vote on a turn's answer (replaces your earlier vote)")
async def rate_turn(conversation_id: str, body: FeedbackIn, user: User, svc: Svc, index: int = Index) -> FeedbackOut:
    return await _rate(svc, user.user_id, conversation_id, index, body)


@router.delete(TURN, response_model=FeedbackDeleted, summary="Withdraw your vote on a turn's answer")
async def unrate_turn(conversation_id: str, user: User, svc: Svc, index: int = Index) -> FeedbackDeleted:
    return await _unrate(svc, user.user_id, conversation_id, index)


@router.put(RESPONSE, response_model=FeedbackOut, summary="Vote on a stored response (replaces your earlier vote)")
async def rate_response(response_id: str, body: FeedbackIn, user: User, svc: Svc) -> FeedbackOut:
    try:
        return await _rate(svc, user.user_id, *_turn_of(response_id), body)
    except TurnNotFoundError:
        raise response_not_found(response_id) from None


@router.delete(RESPONSE, response_model=FeedbackDeleted, summary="Withdraw your vote on a stored response")
async def unrate_response(response_id: str, user: User, svc: Svc) -> FeedbackDeleted:
    try:
        return await _unrate(svc, user.user_id, *_turn_of(response_id))
    except NotFoundError:
        raise response_not_found(response_id) from None
