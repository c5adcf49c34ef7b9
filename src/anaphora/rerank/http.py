"""Rerankers behind HTTP: Cohere-style (``/v1/rerank``, also Jina, Infinity, vLLM) and TEI-style (``/rerank``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import httpx

from anaphora.errors import ModelUnavailableError


class HTTPReranker:
    """``style="cohere"``: POST {url} ``{"model", "query", "documents", "top_n"}`` -> ``{"results": [{"index",
    "relevance_score"}]}``. ``style="tei"``: POST {url} ``{"query", "texts", "raw_scores": false}`` ->
    ``[{"index", "score"}]``. ``url`` is the full endpoint, e.g. ``http://127.0.0.1:8080/rerank``."""

    calls_model = True

    def __init__(
        self,
        url: str,
        *,
        style: Literal["cohere", "tei"] = "cohere",
        model: str = "",
        api_key: str = "",
        timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.style = style
        self.model = model
        self.name = f"http-{style}:{url}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout_s, transport=transport)

    def _payload(self, query: str, texts: Sequence[str]) -> dict:
        if self.style == "tei":
            return {"query": query, "texts": list(texts), "raw_scores": False}
        payload = {"query": query, "documents": list(texts), "top_n": len(texts)}
        if self.model:
            payload["model"] = self.model
        return payload

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        try:
            response = await self._client.post(self.url, json=self._payload(query, texts))
        except httpx.HTTPError as exc:
            raise ModelUnavailableError(
                f"the reranker at {self.url} did not answer: {exc}", hint="start it, or set ANAPHORA_RERANKER=none"
            ) from exc
        if response.status_code >= 400:
            raise ModelUnavailableError(
                f"the reranker at {self.url} answered HTTP {response.status_code}: {response.text[:200]}",
                hint="check ANAPHORA_RERANKER and the model name",
            )
        try:
            body = response.json()
            items = body["results"] if self.style == "cohere" else body
            key = "relevance_score" if self.style == "cohere" else "score"
            scores = [0.0] * len(texts)
            for item in items:
                scores[int(item["index"])] = min(1.0, max(0.0, float(item[key])))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ModelUnavailableError(
                f"the reranker at {self.url} sent an unexpected answer",
                hint=f"check ANAPHORA_RERANK_STYLE (now {self.style!r})",
            ) from exc
        return scores

    async def aclose(self) -> None:
        await self._client.aclose()
