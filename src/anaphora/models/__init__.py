"""Chat models: one Protocol, several backends, chosen by a spec string."""

from anaphora.models.base import (
    ChatModel,
    ChatOptions,
    ChatReply,
    ChatStream,
    ModelCapabilities,
    Usage,
    approx_tokens,
)
from anaphora.models.fake import FakeChatModel
from anaphora.models.registry import available_chat_models, load_chat_model

__all__ = [
    "ChatModel",
    "ChatOptions",
    "ChatReply",
    "ChatStream",
    "FakeChatModel",
    "ModelCapabilities",
    "Usage",
    "approx_tokens",
    "available_chat_models",
    "load_chat_model",
]
