"""The errors Anaphora raises on purpose.

Every error a user can cause or fix derives from :class:`AnaphoraError` and carries a ``hint`` that says how to
fix it. The CLI prints ``message`` and ``hint``; the HTTP layer maps each class to a status code. Nothing below the
edges formats errors for people.

    AnaphoraError
    ├── ConfigurationError      settings that cannot work (unknown backend, bad value, missing extra)
    │   ├── MissingDependencyError   an optional extra is not installed
    │   └── PipelineError            a stage list that breaks the stage contract (a read no stage writes, a write
    │                                a stage did not declare)
    ├── ModelError              a chat model or embedder could not be loaded or called
    │   ├── ModelNotFoundError       no weights where the settings point
    │   └── ModelUnavailableError    an endpoint that does not answer, or answers with an error
    ├── StoreError              the store cannot be opened or written
    │   └── PassageIdTakenError      a passage id another document took meanwhile (concurrent ingestion)
    ├── NotFoundError           an id (conversation, document) that does not exist for this user
    │   ├── ConversationNotFoundError   a conversation id (the same whether missing or another user's)
    │   ├── TurnNotFoundError           a turn of a conversation (the same whether missing or another user's)
    │   └── MemoryNotFoundError         a memory item id (the same whether missing or another user's)
    ├── InputError              bad user input: empty question, unreadable task file, ...
    │   └── InvalidJSONError         a request body that is not JSON (bad UTF-8, too deep, too long a number)
    ├── AuthError               missing, malformed, expired or wrongly signed credentials (HTTP service)
    │   └── PermissionDeniedError    valid credentials that do not allow the action
    ├── RateLimitError          too many turns in flight for one user (HTTP service); says when to retry
"""

from __future__ import annotations


class AnaphoraError(Exception):
    """Base class; ``hint`` tells the user how to fix the problem."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigurationError(AnaphoraError):
    pass


class MissingDependencyError(ConfigurationError):
    """An optional dependency is missing; the hint names the extra that brings it."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the Python package '{package}', which is not installed",
            hint=f"install it with: pip install 'anaphora[{extra}]'",
        )
        self.package = package
        self.extra = extra


class PipelineError(ConfigurationError):
    """The stages do not fit together: one reads what no stage before it writes, or changed what it did not
    declare (the hint says which stage and field)."""


class ModelError(AnaphoraError):
    pass


class ModelNotFoundError(ModelError):
    pass


class ModelUnavailableError(ModelError):
    pass


class StoreError(AnaphoraError):
    pass


class PassageIdTakenError(StoreError):
    """A write refused because another document (written by another process since the ids were chosen) uses one of
    its passage ids; nothing of the write was stored. The ingestor chooses the ids again."""


class NotFoundError(AnaphoraError):
    pass


class ConversationNotFoundError(NotFoundError):
    """No conversation with this id for this user (one that exists for another user is reported the same way)."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"no conversation {conversation_id!r}",
            hint="check the conversation id; list your conversations to find it",
        )


class TurnNotFoundError(NotFoundError):
    """No turn at this index of this user's conversation (another user's turn is reported the same way)."""

    def __init__(self, conversation_id: str, index: int) -> None:
        super().__init__(
            f"no turn {index} in conversation {conversation_id!r}",
            hint="check the conversation id and the turn index (0 is the first turn); read the conversation to see "
            "its turns",
        )


class MemoryNotFoundError(NotFoundError):
    """No memory item with this id for this user (one that exists for another user is reported the same way)."""

    def __init__(self, item_id: str) -> None:
        super().__init__(
            f"no memory {item_id!r}",
            hint="check the memory id; list your memories to find it",
        )


class InputError(AnaphoraError):
    """Input the service refuses. ``param`` names the request parameter at fault when there is one (``input[2]``,
    ``tools``); ``code`` says what is wrong in a stable word an API client can branch on (OpenAI's error codes, e.g.
    ``unsupported_parameter``). The HTTP layer puts both in the error body."""

    def __init__(
        self, message: str, *, hint: str | None = None, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.param = param
        self.code = code


class ConversationExistsError(InputError):
    """A write that starts a conversation under an id that is taken (the caller chose it: ``ChainStart``)."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(
            f"a conversation {conversation_id!r} exists already",
            hint="start the conversation under a fresh id (anaphora.store.new_conversation_id())",
            code="conflict",
        )


class InvalidJSONError(InputError):
    pass


class AuthError(AnaphoraError):
    pass


class PermissionDeniedError(AuthError):
    pass


class RateLimitError(AnaphoraError):
    """Too much at once; ``retry_after_s`` says when trying again makes sense, ``code`` which limit was hit."""

    def __init__(
        self, message: str, *, hint: str | None = None, retry_after_s: float = 1.0, code: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.retry_after_s = retry_after_s
        self.code = code


def require(module: str, *, package: str, extra: str, purpose: str):
    """Import an optional dependency or raise :class:`MissingDependencyError` naming the extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package, extra, purpose) from exc
