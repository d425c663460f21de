"""Small OpenAI-API calls the real tests make (the benchmark itself is `serve.benchmark`)."""

from __future__ import annotations

from typing import Any

import requests

from tests.real.locate import MODEL_ID


def chat(url: str, text: str, max_tokens: int = 8, timeout_s: float = 180) -> dict[str, Any]:
    """One non-streamed chat of exactly `max_tokens` tokens (the tiny model's eos is ignored);
    raises AssertionError with the server's answer unless it is a 200 with usage."""
    body: dict[str, Any] = {"model": MODEL_ID, "messages": [{"role": "user", "content": text}],
                            "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0}
    response = requests.post(url.rstrip("/") + "/v1/chat/completions", json=body, timeout=timeout_s)
    assert response.status_code == 200, f"chat answered {response.status_code}: {response.text[:1000]}"
    answer = response.json()
    assert answer.get("usage"), f"chat answered without usage: {answer}"
    return answer
