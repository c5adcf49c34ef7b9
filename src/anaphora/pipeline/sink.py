"""The one owner of a turn's stream: what a streaming caller is sent of the answer, and when.

The engine creates one :class:`AnswerSink` per turn. The stage that decides the answer (``releases = True``, the
answer stage) drafts it through the sink as it is generated; the sink passes drafts on only when the engine made it
*live*, which it does when no stage after the answer stage declares that it writes ``answer``. Otherwise the sink
holds everything and the engine releases the final answer in one piece once the last stage that may change it has
run. Either way, what was sent is a prefix of the stored answer, so no client ever sees text a later stage removed.
"""

from __future__ import annotations

import asyncio

from anaphora.errors import PipelineError

Deltas = asyncio.Queue[str | None]


class AnswerSink:
    """A turn's stream. ``deltas``: the streaming caller's queue (None: nobody streams); ``live``: drafts are sent
    as they come (else held until :meth:`release`)."""

    def __init__(self, deltas: Deltas | None = None, *, live: bool = True) -> None:
        self._deltas = deltas
        self.live = live and deltas is not None
        self.released = ""  # what the caller has been sent

    @property
    def streaming(self) -> bool:
        """Whether a caller reads the turn as a stream (the answer stage then generates by streaming)."""
        return self._deltas is not None

    def draft(self, delta: str) -> None:
        """More of the answer as the answer stage has decided it (checked, guarded): sent now when live."""
        if self.live:
            self._send(self.released + delta)

    def release(self, answer: str) -> None:
        """The final answer: send what the caller has not had yet."""
        if self._deltas is not None:
            self._send(answer)

    def end(self) -> None:
        """Close the stream (after the turn, whether it was answered or failed)."""
        if self._deltas is not None:
            self._deltas.put_nowait(None)

    def _send(self, text: str) -> None:
        if not text.startswith(self.released):  # cannot happen: only a declared writer of 'answer' changes it
            raise PipelineError(
                "the answer changed after part of it was streamed",
                hint="a stage that changes the answer must declare writes = ('answer', ...)",
            )
        if len(text) > len(self.released):
            assert self._deltas is not None
            self._deltas.put_nowait(text[len(self.released) :])
            self.released = text
