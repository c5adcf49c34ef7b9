"""One loader for the pluggable backends (chat models, embedders, rerankers), chosen by a spec ``scheme[:argument]``.

Each kind is an entry-point group; a factory is ``(argument: str, settings) -> backend``. The built-ins are declared
in pyproject.toml exactly like a third-party package declares its own, and listed again here (:attr:`Backends.
builtins`, the same ``module:attr`` references) so that a source checkout whose installed metadata predates a
built-in still finds it; a test keeps the two lists equal. A built-in's name cannot be taken over by another
package. Nothing is imported until a spec names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from anaphora.errors import ConfigurationError


@dataclass(frozen=True)
class Backends:
    """One kind of backend: its entry-point ``group``, the ``builtins`` (scheme -> ``module:attr``), and what it is
    called in errors (``what``, ``examples`` of specs for the hint)."""

    what: str
    group: str
    builtins: Mapping[str, str]
    examples: str

    def available(self) -> dict[str, EntryPoint]:
        """Every scheme, the built-ins first; an installed package's entry point for a built-in name is ignored."""
        found = {entry.name: entry for entry in entry_points(group=self.group) if entry.name not in self.builtins}
        builtin = {name: EntryPoint(name, target, self.group) for name, target in self.builtins.items()}
        return {**builtin, **found}

    def factory(self, scheme: str, spec: str, available: Mapping[str, EntryPoint] | None = None) -> Callable:
        """The factory registered under ``scheme``, imported now; ``spec`` is what the user wrote, for the error."""
        entries = self.available() if available is None else available
        entry = entries.get(scheme)
        if entry is None:
            raise ConfigurationError(
                f"unknown {self.what} {spec!r}",
                hint=f"use one of: {', '.join(sorted(entries))} (e.g. {self.examples})",
            )
        return entry.load()

    def load(self, spec: str, settings: Any) -> Any:
        """The backend ``spec`` names, built by its factory from ``settings`` (not loaded yet: factories are lazy)."""
        spec = spec.strip()
        scheme, _, argument = spec.partition(":")
        return self.factory(scheme, spec)(argument, settings)


CHAT_MODELS = Backends(
    "chat model",
    "anaphora.chat_models",
    {
        "embedded": "anaphora.models.registry:embedded",
        "gguf": "anaphora.models.registry:gguf",
        "openai": "anaphora.models.registry:openai",
        "anthropic": "anaphora.models.registry:anthropic",
        "fake": "anaphora.models.registry:fake",
    },
    "'embedded', 'gguf:/path.gguf', 'openai:NAME'",
)
EMBEDDERS = Backends(
    "embedder",
    "anaphora.embedders",
    {
        "minilm": "anaphora.embeddings.factories:minilm",
        "sentence-transformers": "anaphora.embeddings.factories:sentence_transformers",
        "hashing": "anaphora.embeddings.factories:hashing",
    },
    "'minilm', 'sentence-transformers:/path' or 'hashing'",
)
RERANKERS = Backends(
    "reranker",
    "anaphora.rerankers",
    {
        "none": "anaphora.rerank.factories:none",
        "cross-encoder": "anaphora.rerank.factories:cross_encoder",
        "http": "anaphora.rerank.factories:http",
    },
    "'none', 'cross-encoder:/path/to/model' or 'http:http://host:port/rerank'",
)
KINDS = (CHAT_MODELS, EMBEDDERS, RERANKERS)
