"""Anthropic and OpenAI-compatible providers (optional extras: `lamina[anthropic]`,
`lamina[openai]`). Their SDKs are imported only when a provider is built.

Both map their answers to the vocabulary of `LLMResponse`, which is Anthropic's: a normal stop
is `end_turn`, a cut-off `max_tokens`, a tool call `tool_use`, a refused or filtered answer
`refusal` (OpenAI's `stop`, `length`, `tool_calls`/`function_call` and `content_filter`). The
SDKs' own retries are off: the caller (the summarisers' ladder) backs off itself, on
`TransientLLMError`.

`http_client` is passed to the SDK as is, for tests and proxies: an `httpx2.Client` for the
current SDKs (openai also takes an `httpx.Client`), e.g. one over an `httpx2.MockTransport`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ..errors import ConfigError
from . import LLM, LLMError, LLMRequest, LLMResponse, TransientLLMError

__all__ = ["AnthropicLLM", "OpenAILLM", "openai_messages"]

OPENAI_STOPS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
"""OpenAI's `finish_reason` in `LLMResponse.stop_reason` terms (others pass through)."""

REDACTED_THINKING = "[redacted thinking]"


def _transient(exc: Exception) -> bool:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return (
        status in (408, 409, 429)
        or (isinstance(status, int) and status >= 500)
        or name in ("APITimeoutError", "APIConnectionError", "RateLimitError")
    )


def _failure(name: str, exc: Exception) -> LLMError:
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = TransientLLMError if _transient(exc) else LLMError
    return kind(f"{name}: {exc}", status=status)


def _sdk(provider: str) -> Any:
    """The provider's SDK (its module shares its name), imported when a provider is made: the
    SDKs are optional extras."""
    try:
        return importlib.import_module(provider)
    except ImportError:
        raise ConfigError(
            f"the {provider} provider needs: pip install 'lamina[{provider}]'"
        ) from None


class AnthropicLLM(LLM):
    """Anthropic's Messages API. `LLMRequest.temperature` is not sent: the SDK (from 1.0) has no
    sampling parameters, and the API version it speaks (from SDK 2.0) refuses them."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        http_client: Any = None,
    ) -> None:
        anthropic = _sdk("anthropic")
        if not api_key:
            raise ConfigError("the anthropic provider needs ANTHROPIC_API_KEY")
        self.name = f"anthropic:{model}"
        self.model = model
        self._client: Any = anthropic.Anthropic(
            api_key=api_key, timeout=timeout, max_retries=0, http_client=http_client
        )

    def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = list(request.tools)
        try:
            response = self._client.messages.create(**kwargs)
        except Exception as exc:
            raise _failure(self.name, exc) from exc
        texts: list[str] = []
        thinking: list[str] = []
        calls: list[dict[str, Any]] = []
        for block in response.content:
            kind = getattr(block, "type", "")
            if kind == "text":
                texts.append(block.text)
            elif kind == "thinking":
                thinking.append(block.thinking)
            elif kind == "redacted_thinking":
                thinking.append(REDACTED_THINKING)
            elif kind == "tool_use":
                calls.append({"id": block.id, "name": block.name, "input": dict(block.input)})
        usage = response.usage
        return LLMResponse(
            text="".join(texts),
            stop_reason=response.stop_reason or "",
            thinking="\n\n".join(thinking),
            tool_calls=calls,
            # Cached input is billed and counted apart from `input_tokens`.
            input_tokens=usage.input_tokens
            + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
            + (getattr(usage, "cache_read_input_tokens", 0) or 0),
            output_tokens=usage.output_tokens,
            model=response.model or self.model,
        )


class OpenAILLM(LLM):
    """OpenAI's chat completions, or a compatible server's (`base_url`: vLLM, Ollama, ...).
    The output cap is sent as `max_completion_tokens` to OpenAI (its reasoning models refuse
    `max_tokens`) and as `max_tokens` to a compatible server, which may know only that one. A
    model that refuses the temperature (OpenAI's reasoning models take only the default) is
    asked again without it, and from then on never sent one."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        http_client: Any = None,
    ) -> None:
        openai = _sdk("openai")
        if not api_key and not base_url:
            raise ConfigError("the openai provider needs OPENAI_API_KEY (or OPENAI_BASE_URL)")
        self.name = f"openai:{model}"
        self.model = model
        self._cap = "max_tokens" if base_url else "max_completion_tokens"
        self._temperature = True
        self._client: Any = openai.OpenAI(
            api_key=api_key or "not-needed",
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
            http_client=http_client,
        )

    def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request.system, request.messages),
            self._cap: request.max_tokens,
        }
        if self._temperature:
            kwargs["temperature"] = request.temperature
        if request.tools:
            kwargs["tools"] = [
                {"type": "function", "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {"type": "object"}),
                }}
                for t in request.tools
            ]  # fmt: skip
        try:
            response = self._client.chat.completions.create(**kwargs)
        except Exception as exc:
            if not _refuses_temperature(exc) or "temperature" not in kwargs:
                raise _failure(self.name, exc) from exc
            self._temperature = False
            del kwargs["temperature"]
            try:
                response = self._client.chat.completions.create(**kwargs)
            except Exception as again:
                raise _failure(self.name, again) from again
        if not response.choices:
            raise LLMError(f"{self.name}: the answer holds no choices")
        choice = response.choices[0]
        message = choice.message
        finish = choice.finish_reason or ""
        stop = OPENAI_STOPS.get(finish, finish)
        if getattr(message, "refusal", None):
            stop = "refusal"
        calls = [_openai_call(c) for c in (message.tool_calls or [])]
        # Reasoning servers (vLLM, Ollama, DeepSeek) add the thinking as a field of their own.
        thinking = getattr(message, "reasoning_content", None)
        thinking = thinking or getattr(message, "reasoning", None)
        usage = response.usage
        return LLMResponse(
            text=message.content or "",
            stop_reason=stop,
            thinking=thinking if isinstance(thinking, str) else "",
            tool_calls=calls,
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            model=response.model or self.model,
        )


def _refuses_temperature(exc: Exception) -> bool:
    """A 400 naming the temperature: `Unsupported value: 'temperature' does not support 0.0
    with this model. Only the default (1) value is supported.`"""
    return getattr(exc, "status_code", None) == 400 and "temperature" in str(exc)


def _openai_call(call: Any) -> dict[str, Any]:
    """A tool call of an OpenAI answer, its JSON arguments parsed (kept as `arguments` when they
    are not a JSON object: models may write broken JSON)."""
    function: Any = getattr(call, "function", None) or call.custom
    raw = getattr(function, "arguments", None)
    if raw is None:  # a custom tool's free-form input
        return {"id": call.id, "name": function.name, "input": {"input": function.input}}
    try:
        parsed = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        parsed = None
    arguments = parsed if isinstance(parsed, dict) else {"arguments": raw}
    return {"id": call.id, "name": function.name, "input": arguments}


def _result_text(content: Any) -> str:
    """A tool result's content (a string, or a list of text and image blocks) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [
            str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type', 'block')}]"
            for b in content
            if isinstance(b, Mapping)
        ]
        return "\n".join(parts)
    return "" if content is None else str(content)


def openai_messages(system: str, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Provider-neutral messages (content a string, or Anthropic-style blocks: text, tool_use,
    tool_result) as OpenAI chat messages: the system prompt first, tool calls as `tool_calls`,
    each tool result as its own `tool` message before the user's text."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
            continue
        texts = [str(b["text"]) for b in content if b.get("type") == "text"]
        if message["role"] == "assistant":
            calls = [
                {"id": b["id"], "type": "function", "function": {
                    "name": b["name"], "arguments": orjson.dumps(b.get("input", {})).decode()}}
                for b in content
                if b.get("type") == "tool_use"
            ]  # fmt: skip
            entry: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        for block in content:
            if block.get("type") == "tool_result":
                text = _result_text(block.get("content", ""))
                text = f"[error] {text}" if block.get("is_error") else text
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        if texts:
            out.append({"role": message["role"], "content": "\n\n".join(texts)})
    return out
