"""A sentence-transformers CrossEncoder from a local directory (never downloaded at run time)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anaphora.embeddings.sentence_transformers import load_local
from anaphora.errors import ModelNotFoundError


class CrossEncoderReranker:
    """A local sentence-transformers cross-encoder, run in a worker thread."""

    calls_model = True

    def __init__(self, model_path: str | Path, *, batch_size: int = 32) -> None:
        self.model_path = Path(model_path).expanduser()
        if not (self.model_path / "config.json").is_file():
            raise ModelNotFoundError(
                f"no cross-encoder model in {self.model_path}",
                hint="point ANAPHORA_RERANKER at a directory saved with CrossEncoder.save() "
                "(cross-encoder:/path), or use 'none'",
            )
        self.name = f"cross-encoder:{self.model_path.name}"
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def warm_up(self) -> None:
        with self._lock:
            if self._model is None:
                self._model = load_local("CrossEncoder", self.model_path, "the cross-encoder reranker")

    def _score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.warm_up()
        import numpy as np

        raw = np.asarray(
            self._model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False),
            dtype=np.float64,
        ).reshape(len(texts), -1)
        column = raw[:, -1]  # one relevance logit/probability per pair (the positive class if there are two)
        if column.min() < 0 or column.max() > 1:  # logits: map to [0, 1]
            column = 1 / (1 + np.exp(-column))
        return [float(s) for s in column]

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return await asyncio.to_thread(self._score, query, texts) if texts else []

    async def aclose(self) -> None:
        return None  # nothing held but the model in memory
