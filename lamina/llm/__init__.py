"""Language-model providers behind one small protocol, for the optional work that needs a model
(fact extraction, and summaries for the context compiler: `lamina.context.ladder`). Lamina
never requires one; `spend.py` keeps what summarisers spent, for their caps.

    llm = get_llm("anthropic:claude-haiku-4-5")        # needs the `anthropic` extra and a key
    llm = get_llm("openai:gpt-4.1-mini")                # the `openai` extra; OPENAI_BASE_URL for
                                                        # vLLM, Ollama and other compatible servers
    llm = ScriptedLLM(["...", "..."])                   # tests: answers in order, records requests

A provider turns an `LLMRequest` into an `LLMResponse` and raises `TransientLLMError` for what a
later retry may fix (rate limits, overload, timeouts, 5xx) and `LLMError` for the rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, LaminaError

__all__ = [
    "LLM",
    "NORMAL_STOPS",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "ScriptedLLM",
    "TransientLLMError",
    "get_llm",
]


NORMAL_STOPS = frozenset({"end_turn", "stop_sequence", "stop"})
"""Stop reasons of an answer that ended as the model meant it to (providers normalise theirs
to these and to `max_tokens`, `tool_use`, `refusal`)."""


class LLMError(LaminaError):
    """A provider failed, or answered with something unusable. `status` is the HTTP status of
    the provider's error answer, when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientLLMError(LLMError):
    """A failure a later retry may fix: rate limit, overload, timeout, server error."""


@dataclass(frozen=True, slots=True)
class LLMRequest:
    system: str
    messages: Sequence[Mapping[str, Any]]
    """Provider-neutral messages: {"role": "user" | "assistant", "content": ...}, the content a
    string or a list of Anthropic-style blocks (text, tool_use, tool_result), which each
    provider spells its own way."""
    max_tokens: int = 1024
    temperature: float = 0.0
    """Sent to OpenAI-compatible servers; Anthropic's current API takes no sampling settings."""
    tools: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True, slots=True)
class LLMResponse:
    text: str
    stop_reason: str = "end_turn"
    """`end_turn` (a normal stop), `max_tokens`, `tool_use`, `refusal`, ..."""
    thinking: str = ""
    tool_calls: Sequence[Mapping[str, Any]] = ()
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""


class LLM:
    """The protocol (as a base class, so providers share `name`)."""

    name: str = "llm"

    def complete(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - interface
        raise NotImplementedError


Script = LLMResponse | str | Exception | Callable[[LLMRequest], "LLMResponse | str"]


@dataclass
class ScriptedLLM(LLM):
    """A fake provider for tests: returns the scripted answers in order (a string is a normal
    answer, an exception is raised, a callable sees the request), and records every request."""

    script: list[Script]
    name: str = "scripted"
    requests: list[LLMRequest] = field(default_factory=list)

    def complete(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        if not self.script:
            raise LLMError("the scripted model has no answers left")
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        if callable(step) and not isinstance(step, LLMResponse):
            step = step(request)
        if isinstance(step, str):
            return LLMResponse(text=step, model=self.name)
        return step


def get_llm(spec: str, env: Mapping[str, str] | None = None) -> LLM:
    """A provider from `provider:model` (`anthropic:...`, `openai:...`)."""
    environ = os.environ if env is None else env
    provider, _, model = spec.partition(":")
    if not model:
        raise ConfigError(f"name the model too: {spec!r} (e.g. anthropic:claude-haiku-4-5)")
    if provider == "anthropic":
        from .providers import AnthropicLLM

        return AnthropicLLM(model, api_key=environ.get("ANTHROPIC_API_KEY"))
    if provider == "openai":
        from .providers import OpenAILLM

        return OpenAILLM(
            model,
            api_key=environ.get("OPENAI_API_KEY"),
            base_url=environ.get("OPENAI_BASE_URL"),
        )
    raise ConfigError(f"unknown model provider {provider!r} (known: anthropic, openai)")
