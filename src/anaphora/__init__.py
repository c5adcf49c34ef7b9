"""Anaphora: conversational RAG where follow-up questions work."""

from anaphora.app import Anaphora, Components, build_components
from anaphora.errors import (
    AnaphoraError,
    ConfigurationError,
    InputError,
    MissingDependencyError,
    ModelError,
    ModelNotFoundError,
    ModelUnavailableError,
    NotFoundError,
    StoreError,
)
from anaphora.models import ChatModel, ChatOptions, FakeChatModel
from anaphora.pipeline.engine import Engine, TurnRequest, TurnStream
from anaphora.sanitize import sanitize
from anaphora.settings import Settings, load_settings
from anaphora.types import Citation, Message, Passage, TurnResult, TurnTrace

__version__ = "0.1.0"

__all__ = [
    "Anaphora",
    "AnaphoraError",
    "ChatModel",
    "ChatOptions",
    "Citation",
    "Components",
    "ConfigurationError",
    "Engine",
    "FakeChatModel",
    "InputError",
    "Message",
    "MissingDependencyError",
    "ModelError",
    "ModelNotFoundError",
    "ModelUnavailableError",
    "NotFoundError",
    "Passage",
    "Settings",
    "StoreError",
    "TurnRequest",
    "TurnResult",
    "TurnStream",
    "TurnTrace",
    "__version__",
    "build_components",
    "load_settings",
    "sanitize",
]
