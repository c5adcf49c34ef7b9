"""A sentence-transformers model run by ONNX Runtime instead of PyTorch: same vectors, a fraction of the CPU.

Query embedding is most of a turn's CPU time when the model is remote: all-MiniLM-L6-v2 through PyTorch spends
about 15 ms on an 11-token query on one core of the reference machine, ONNX Runtime about 5.5 ms, with vectors equal
to within 1e-6 cosine (so passages embedded by either runtime stay comparable and the embedder keeps its name).

The ONNX graph is exported from the local model once, on first use, into a cache directory, checked against the
PyTorch model on probe sentences, and reused afterwards (later starts need neither PyTorch nor the export). Only
the standard layout is supported - a Transformer, mean pooling, optional Normalize - with a ``tokenizer.json``;
anything else raises :class:`OnnxUnsupported` and the caller keeps PyTorch.

``precision="int8"`` exports the model again with its attention written out (eager, not PyTorch's fused SDPA call),
so that ONNX Runtime's transformer optimizer can fuse each layer's attention into one ``Attention`` node (and its
GELU and layer norms), then quantizes that graph with ONNX Runtime's own dynamic quantization (int8 weights of the
MatMuls and attentions, activations quantized per batch at run time), once, into the same cache under a name that
includes the precision and the recipe. Without the fusion, int8 took 1.7x less CPU per chunk than fp32; with it,
2.05x (bench/NOTES.md, issue 26). Its vectors are close to the fp32 ones but not equal (a mean cosine gap of about
5e-3), so an index embedded at one precision is not queried at the other: the embedder's name carries the precision
(see :func:`precision_name`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("anaphora.embeddings")

PROBES = (
    "How do I install it on Kubernetes?",
    "and on ARM?",
    "Die Konfiguration liegt in /etc/anaphora.toml; siehe Abschnitt 3.2.",
    "A much longer sentence about retrieval-augmented generation, conversation memory, rolling summaries, token "
    "budgets and the many ways a follow-up question can refer back to what was said before it in a chat.",
)
MAX_COSINE_GAP = 1e-4
MAX_INT8_COSINE_GAP = 0.05  # a sanity bound: a broken quantization gives gaps of 0.3 and more
# Only the MatMuls and the fused attentions, weights per output channel: ONNX Runtime's defaults (every op it can
# quantize, one scale per tensor) moved realdocs chunk vectors by a mean cosine of 0.069; these options by 0.005-0.007
# (bench/NOTES.md). DefaultTensorType: the fused nodes' outputs have no inferred type (they are float32).
INT8_OPTIONS = {
    "per_channel": True,
    "op_types_to_quantize": ["MatMul", "Attention"],
    "extra_options": {"DefaultTensorType": 1},
    "fused": "bert-attention",
}
PRECISIONS = ("fp32", "int8")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class OnnxUnsupported(Exception):
    """This model (or this installation) cannot run on ONNX Runtime; use PyTorch."""


def _layout(model_path: Path) -> int:
    """The model's max sequence length, if its layout is Transformer + mean pooling (+ Normalize)."""
    try:
        modules = json.loads((model_path / "modules.json").read_text())
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        pooling = next(m for m in modules if m["type"].endswith("Pooling"))
        pooling_config = json.loads((model_path / pooling["path"] / "config.json").read_text())
        max_length = int(json.loads((model_path / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        raise OnnxUnsupported(f"not a standard sentence-transformers layout: {exc}") from exc
    mean_only = pooling_config.get("pooling_mode_mean_tokens") and not any(
        pooling_config.get(mode)
        for mode in ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens")
    )
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]) or not mean_only:
        raise OnnxUnsupported(f"modules {kinds} with pooling {pooling_config} (only Transformer + mean pooling)")
    if not (model_path / "tokenizer.json").is_file():
        raise OnnxUnsupported("no tokenizer.json")
    return max_length


def fingerprint(model_path: Path) -> str:
    """Changes when the model files change, so a stale export is never used."""
    digest = hashlib.sha256(str(model_path.resolve()).encode())
    for name in sorted(os.listdir(model_path)):
        path = model_path / name
        if path.is_file():
            stat = path.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Threading:
    """How the session's intra-op threads work. ``threads`` 0: ONNX Runtime's default, one per physical core.

    ``spin_wait``: the threads spin-wait for the next operator's work while a batch runs and stop spinning when
    the batch returns (``session.force_spinning_stop``), so they take no CPU between batches; without it they
    block and are woken for every operator of the graph, which on a VM costs a wake-up of the idle vCPU each time
    (ingest kept 1.2 of 2 cores busy that way, 1.9 with spin_wait; bench/NOTES.md, issue 26). Both keep the cores
    free between batches for the event loop (what ``allow_spinning`` on its own would not)."""

    threads: int = 0
    spin_wait: bool = True

    def session_options(self, ort: Any) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin_wait else "0")
        if self.spin_wait:
            options.add_session_config_entry("session.force_spinning_stop", "1")
        return options


class OnnxEncoder:
    """Tokenizer (``tokenizers``) + ONNX Runtime session: ``encode`` returns L2-normalised float32 rows."""

    def __init__(self, onnx_path: Path, model_path: Path, max_length: int, threading: Threading) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise OnnxUnsupported(f"{exc.name} is not installed") from exc
        self.counter = Tokenizer.from_file(str(model_path / "tokenizer.json"))  # counts whole texts
        self.counter.no_truncation()
        self.counter.no_padding()
        self.tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))  # feeds the model: truncates
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.no_padding()
        options = threading.session_options(ort)
        self.session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        self.wanted = [i.name for i in self.session.get_inputs()]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(texts))
        width = max(len(e.ids) for e in encodings)
        batch = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in INPUTS}
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            batch["input_ids"][row, :n] = encoding.ids
            batch["attention_mask"][row, :n] = encoding.attention_mask
            batch["token_type_ids"][row, :n] = encoding.type_ids
        (vectors,) = self.session.run(None, {name: batch[name] for name in self.wanted})
        return np.asarray(vectors, dtype=np.float32)

    def count_tokens(self, text: str) -> int:
        return len(self.counter.encode(text, add_special_tokens=False).ids)


def _export(st_model: Any, target: Path, attention: str = "sdpa") -> None:
    """``attention`` "eager": the attention written out op by op, the pattern the transformer optimizer fuses."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, transformer: Any) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, dim=-1)

    sample = st_model.tokenizer(list(PROBES[:2]), return_tensors="pt", padding=True)
    if "token_type_ids" not in sample:
        raise OnnxUnsupported("the tokenizer gives no token_type_ids")
    axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
    transformer = st_model[0].auto_model.eval()
    before = transformer.config._attn_implementation
    transformer.set_attn_implementation(attention)
    # the TorchScript exporter (no onnxscript needed) warns about itself and about traced shape checks
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled(transformer),
            tuple(sample[name] for name in INPUTS),
            str(target),
            input_names=list(INPUTS),
            output_names=["embedding"],
            dynamic_axes={**axes, "embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    transformer.set_attn_implementation(before)


def resolve_precision(precision: str, runtime: str, cache_dir: Path | None) -> str:
    """``auto``: int8 where ONNX Runtime can run it (not ``runtime = torch``, a cache directory for the quantized
    model, onnx and onnxruntime installed), else fp32; ``fp32`` and ``int8`` as they are. Decided from the
    settings and the installation alone, so one installation always gives one embedder name."""
    if precision != "auto":
        return precision
    installed = all(importlib.util.find_spec(module) is not None for module in ("onnx", "onnxruntime"))
    return "int8" if runtime != "torch" and cache_dir is not None and installed else "fp32"


def precision_name(name: str, precision: str) -> str:
    """The embedder's name at ``precision``: fp32 keeps the model's name (its vectors equal PyTorch's), int8 gets a
    suffix, so caches, index stamps and the corpus's record of its embedder tell the two apart."""
    return name if precision == "fp32" else f"{name}-{precision}"


def export_path(cache_dir: Path, model_path: Path, name: str, precision: str) -> Path:
    """Where the export of ``model_path`` at ``precision`` is cached: the key is the model files and the precision
    (for int8 also the quantization options, so a changed recipe is never read from an older file)."""
    key = fingerprint(model_path)
    if precision == "int8":
        key += "-" + hashlib.sha256(json.dumps(INT8_OPTIONS, sort_keys=True).encode()).hexdigest()[:8]
    return cache_dir / f"{name}-{key}-{precision}.onnx"


def _staging(cache_dir: Path) -> tempfile.TemporaryDirectory:
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryDirectory(dir=cache_dir)
    except OSError as exc:
        raise OnnxUnsupported(f"cannot write the export to {cache_dir}: {exc}") from exc


def _check(encoder: OnnxEncoder, expected: np.ndarray, bound: float, what: str) -> None:
    gap = float(np.max(1.0 - np.sum(expected * encoder.encode(PROBES), axis=1)))
    if gap > bound:
        raise OnnxUnsupported(f"{what} differs from the reference model (cosine gap {gap:.2e})")


def _export_fp32(
    model_path: Path, target: Path, max_length: int, threading: Threading, load_torch_model
) -> OnnxEncoder:
    try:
        import onnx  # noqa: F401  (the exporter needs it)
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise OnnxUnsupported(f"{exc.name} is not installed") from exc
    st_model = load_torch_model()
    with _staging(target.parent) as scratch:
        staged = Path(scratch) / target.name
        try:
            _export(st_model, staged)
        except OnnxUnsupported:
            raise
        except Exception as exc:  # the exporter's errors are many and undocumented
            raise OnnxUnsupported(f"export failed: {type(exc).__name__}: {exc}") from exc
        encoder = OnnxEncoder(staged, model_path, max_length, threading)
        expected = np.asarray(st_model.encode(list(PROBES), normalize_embeddings=True), dtype=np.float32)
        _check(encoder, expected, MAX_COSINE_GAP, "the export")
        os.replace(staged, target)
    log.info("exported %s to ONNX at %s", target.stem, target)
    return encoder  # its session already holds the checked model; the file it was read from has moved


def _fuse_attention(st_model: Any, model_path: Path, target: Path) -> None:
    """The eager export of ``st_model`` with ONNX Runtime's BERT fusions applied, saved at ``target``; raises
    :class:`OnnxUnsupported` unless every layer's attention fused."""
    from onnxruntime.transformers.optimizer import optimize_model

    config = json.loads((model_path / "config.json").read_text())
    eager = target.with_name("eager-" + target.name)
    _export(st_model, eager, attention="eager")
    fused = optimize_model(
        str(eager), model_type="bert", num_heads=config["num_attention_heads"], hidden_size=config["hidden_size"]
    )
    attentions = fused.get_fused_operator_statistics().get("Attention", 0)
    if attentions != config["num_hidden_layers"]:
        raise OnnxUnsupported(f"{attentions} of {config['num_hidden_layers']} attention layers fused")
    fused.save_model_to_file(str(target))


def _quantize_int8(
    fp32: OnnxEncoder, model_path: Path, target: Path, max_length: int, threading: Threading, load_torch_model
):
    """Dynamic int8 quantization of the attention-fused export (ONNX Runtime's ``quantize_dynamic``), checked
    against the fp32 export."""
    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise OnnxUnsupported(f"onnxruntime.quantization is not available: {exc}") from exc
    options = {k: v for k, v in INT8_OPTIONS.items() if k != "fused"}
    with _staging(target.parent) as scratch:
        staged = Path(scratch) / target.name
        fused = Path(scratch) / "fused.onnx"
        try:
            _fuse_attention(load_torch_model(), model_path, fused)
            quantize_dynamic(fused, staged, weight_type=QuantType.QInt8, **options)
        except OnnxUnsupported:
            raise
        except Exception as exc:  # the optimizer's and quantizer's errors are as undocumented as the exporter's
            raise OnnxUnsupported(f"int8 quantization failed: {type(exc).__name__}: {exc}") from exc
        encoder = OnnxEncoder(staged, model_path, max_length, threading)
        _check(encoder, fp32.encode(PROBES), MAX_INT8_COSINE_GAP, "the int8 model")
        os.replace(staged, target)
    log.info("quantized %s to int8 at %s", target.stem, target)
    return encoder


def load_onnx_encoder(
    model_path: Path, cache_dir: Path, name: str, threading: Threading, load_torch_model, precision: str = "fp32"
) -> OnnxEncoder:
    """The cached ONNX export of ``model_path`` at ``precision`` ("fp32" or "int8"), made and checked first if
    needed (int8 from the fp32 export, which is made too).

    ``load_torch_model()`` gives the sentence-transformers model (only called to export). Raises
    :class:`OnnxUnsupported` when the model or the installation cannot do it."""
    if precision not in PRECISIONS:
        raise OnnxUnsupported(f"unknown precision {precision!r}")
    max_length = _layout(model_path)
    target = export_path(cache_dir, model_path, name, precision)
    if target.is_file():
        return OnnxEncoder(target, model_path, max_length, threading)
    fp32_path = export_path(cache_dir, model_path, name, "fp32")
    if fp32_path.is_file():
        fp32 = OnnxEncoder(fp32_path, model_path, max_length, threading)
    else:
        fp32 = _export_fp32(model_path, fp32_path, max_length, threading, load_torch_model)
    if precision == "fp32":
        return fp32
    return _quantize_int8(fp32, model_path, target, max_length, threading, load_torch_model)
