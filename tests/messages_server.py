"""A local server that speaks Anthropic's Messages API (``POST /v1/messages``), for the Anthropic backend's tests.

It records every request and answers like the API: JSON, or server-sent events with ``stream: true``
(``message_start``, ``content_block_start``, ``ping``, ``content_block_delta``, ``content_block_stop``,
``message_delta``, ``message_stop``). Its prompt cache follows the API's rules: the prompt is the system blocks then
the message blocks; each block marked ``cache_control`` is a breakpoint; a request reads from the cache the longest
breakpoint prefix some earlier request wrote (looking back at earlier block boundaries too), and writes the rest up
to its last breakpoint. Tokens are counted as four characters each.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.local_http import serving


def tokens(text: str) -> int:
    return (len(text) + 3) // 4


def blocks(body: dict) -> list[tuple[str, bool]]:
    """The prompt as (serialised block, is a breakpoint), system first."""
    out = [(f"system:{b['text']}", "cache_control" in b) for b in body.get("system") or []]
    for message in body["messages"]:
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        out += [(f"{message['role']}:{b['text']}", "cache_control" in b) for b in content]
    return out


@dataclass
class MessagesServer:
    base_url: str = ""
    requests: list[dict] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    reply: str = "Four is the answer."
    status: int = 200
    cached_prefixes: set[tuple[str, ...]] = field(default_factory=set)

    def usage(self, body: dict) -> dict[str, int]:
        prompt = blocks(body)
        total = sum(tokens(text) for text, _ in prompt)
        breakpoints = [i for i, (_, marked) in enumerate(prompt) if marked]
        read = 0
        for end in range(len(prompt), 0, -1):  # the longest earlier-written prefix at a block boundary
            if tuple(text for text, _ in prompt[:end]) in self.cached_prefixes:
                read = sum(tokens(text) for text, _ in prompt[:end])
                break
        written = 0
        if breakpoints:
            last = breakpoints[-1] + 1
            for end in range(1, last + 1):
                self.cached_prefixes.add(tuple(text for text, _ in prompt[:end]))
            written = max(0, sum(tokens(text) for text, _ in prompt[:last]) - read)
        return {
            "input_tokens": total - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": tokens(self.reply),
        }

    def message(self, body: dict, usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": self.reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }

    def events(self, body: dict, usage: dict[str, int]) -> Iterator[tuple[str, dict]]:
        start = self.message(body, {**usage, "output_tokens": 1})
        start["content"], start["stop_reason"] = [], None
        yield "message_start", {"type": "message_start", "message": start}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        yield "ping", {"type": "ping"}
        words = self.reply.split(" ")
        for i, word in enumerate(words):
            piece = word if i == len(words) - 1 else word + " "
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": piece},
                },
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        yield "message_stop", {"type": "message_stop"}


def _handler(state: MessagesServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # close after each response: the SSE body ends with the connection

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            state.requests.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if self.path != "/v1/messages":
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                return
            if state.status != 200:
                error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                self._json(state.status, error)
                return
            usage = state.usage(body)
            if not body.get("stream"):
                self._json(200, state.message(body, usage))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for name, data in state.events(body, usage):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        def _json(self, status: int, payload: dict) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


@contextmanager
def messages_server() -> Iterator[MessagesServer]:
    state = MessagesServer()
    with serving(_Server(("127.0.0.1", 0), _handler(state))) as base_url:
        state.base_url = base_url
        yield state
