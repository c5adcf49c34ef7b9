"""A Responses API chain across two `anaphora serve` processes sharing the Redis conversation store: a response
created on one replica is continued, read and deleted on the other, since a response is a stored turn and its id
names it; nothing of it lives in a replica's memory. Another user's ids stay 404 on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.integration.services import ServiceProcess, base_settings, ingest_corpus
from tests.server_harness import token

pytestmark = [pytest.mark.integration, pytest.mark.slow]
pytest.importorskip("redis", reason="the redis extra is not installed")

from tests.integration.conftest import REDIS_URL  # noqa: E402

QUESTIONS = [
    "How do I install Kestrel on Kubernetes?",
    "And on ARM?",
    "What about its memory limits?",
    "What happens when it hits that limit?",
    "How do I check whether it was OOMKilled?",
]


@pytest.fixture
def replicas(tmp_path: Path, prefix: str) -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    try:
        for name in ("a", "b"):
            data_dir = tmp_path / name / "data"
            ingest_corpus(data_dir)
            env = base_settings(
                data_dir,
                conversation_store="redis",
                session_store="redis",
                redis_url=REDIS_URL,
                redis_key_prefix=prefix,
                turn_lock="auto",
                memory="off",
            )
            started.append(ServiceProcess(env, tmp_path / name, name=f"replica-{name}").start())
        yield started
    finally:
        for service in started:
            service.stop()


def client(service: ServiceProcess, sub: str = "alice") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=token(sub), max_retries=0, timeout=60)


def test_a_chain_continues_across_replicas_and_stays_its_users(replicas) -> None:
    clients = [client(service) for service in replicas]
    previous, replies = None, []
    for number, question in enumerate(QUESTIONS):
        reply = clients[number % 2].responses.create(
            model="anaphora", input=question, previous_response_id=previous, stream=number == 4
        )
        reply = list(reply)[-1].response if number == 4 else reply
        replies.append(reply)
        previous = reply.id
    assert [r.previous_response_id for r in replies[1:]] == [r.id for r in replies[:-1]]
    assert len({r.conversation.id for r in replies}) == 1
    for reply in replies:
        assert clients[0].responses.retrieve(reply.id).output_text == reply.output_text
        assert clients[1].responses.retrieve(reply.id).output_text == reply.output_text
    for service in replicas:
        with client(service, "bob") as bob, pytest.raises(openai.NotFoundError):
            bob.responses.retrieve(replies[-1].id)
    clients[1].responses.delete(replies[2].id)
    with pytest.raises(openai.NotFoundError):
        clients[0].responses.retrieve(replies[0].id)
    for made in clients:
        made.close()
