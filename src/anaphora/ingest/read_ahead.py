"""Run a generator in a thread, a bounded number of items ahead of its consumer.

Ingestion parses and chunks files (Python, holding the GIL) while the embedder runs (ONNX Runtime and the Rust
tokenizer, which release it), so producing the next documents in a thread overlaps the two. The queue is bounded,
so a slow embedder holds back the parser instead of the parsed documents piling up in memory. The standard library
has no bounded thread-backed iterator (``concurrent.futures`` maps eagerly), hence these few lines.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_DONE = object()


def read_ahead(items: Iterable[T], size: int) -> Iterator[T]:
    """Yield ``items`` in order, produced by a worker thread at most ``size`` ahead. An exception in the producer
    is raised here, at the point it was reached; a consumer that stops early (or fails) stops the producer."""
    buffer: queue.Queue = queue.Queue(maxsize=max(1, size))
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                buffer.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which re-raises it
            put(_Failure(exc))
            return
        put(_DONE)

    worker = threading.Thread(target=produce, name="anaphora-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = buffer.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item
    finally:
        stop.set()
        worker.join()


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
