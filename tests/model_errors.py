"""The errors a real endpoint raises through ``openai``, built for tests that make a model fail on purpose.

The call layer recognises failures by the types real clients raise (no exception class of a test double's own):
a 5xx or 429 is retried, a 400 naming the context window is a prompt too long.
"""

from __future__ import annotations

import httpx
import openai

_REQUEST = httpx.Request("POST", "http://x/v1/chat/completions")


def bad_request(body: dict, message: str = "bad request") -> openai.BadRequestError:
    """HTTP 400 with ``body`` as the endpoint's JSON error."""
    return openai.BadRequestError(message, response=httpx.Response(400, request=_REQUEST), body=body)


def prompt_too_long_error(message: str = "This model's maximum context length is exceeded") -> openai.BadRequestError:
    """HTTP 400 ``context_length_exceeded``: the server refuses a prompt over its context window."""
    return bad_request({"code": "context_length_exceeded", "message": message}, message)


def server_error(message: str = "503 from upstream") -> openai.InternalServerError:
    """HTTP 503: retryable."""
    return openai.InternalServerError(message, response=httpx.Response(503, request=_REQUEST), body=None)


def rate_limited(message: str = "429 Too Many Requests") -> openai.RateLimitError:
    """HTTP 429: retryable."""
    return openai.RateLimitError(message, response=httpx.Response(429, request=_REQUEST), body=None)
