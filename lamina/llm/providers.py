"""Anthropic and OpenAI-compatible providers (optional extras: `lamina[anthropic]`,
`lamina[openai]`). Their SDKs are imported only when a provider is built."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from ..errors import ConfigError
from . import LLM, LLMError, LLMRequest, LLMResponse, TransientLLMError

__all__ = ["AnthropicLLM", "OpenAILLM", "openai_messages"]


def _transient(exc: Exception) -> bool:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return (
        status in (408, 409, 429)
        or (isinstance(status, int) and status >= 500)
        or name in ("APITimeoutError", "APIConnectionError", "RateLimitError")
    )


class AnthropicLLM(LLM):
    def __init__(self, model: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        try:
            import anthropic
        except ImportError:
            raise ConfigError(
                "the anthropic provider needs: pip install 'lamina[anthropic]'"
            ) from None
        if not api_key:
            raise ConfigError("the anthropic provider needs ANTHROPIC_API_KEY")
        self.name = f"anthropic:{model}"
        self.model = model
        self._client: Any = anthropic.Anthropic(api_key=api_key, timeout=timeout, max_retries=0)

    def complete(self, request: LLMRequest) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "system": request.system,
            "messages": list(request.messages),
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if request.tools:
            kwargs["tools"] = list(request.tools)
        try:
            response = self._client.messages.create(**kwargs)
        except Exception as exc:
            if _transient(exc):
                raise TransientLLMError(f"{self.name}: {exc}") from exc
            raise LLMError(f"{self.name}: {exc}") from exc
        text = "".join(b.text for b in response.content if getattr(b, "type", "") == "text")
        thinking = "".join(
            getattr(b, "thinking", "") for b in response.content if b.type == "thinking"
        )
        calls = [
            {"id": b.id, "name": b.name, "input": b.input}
            for b in response.content
            if getattr(b, "type", "") == "tool_use"
        ]
        return LLMResponse(
            text=text,
            stop_reason=response.stop_reason or "",
            thinking=thinking,
            tool_calls=calls,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
            model=response.model,
        )


class OpenAILLM(LLM):
    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise ConfigError("the openai provider needs: pip install 'lamina[openai]'") from None
        if not api_key and not base_url:
            raise ConfigError("the openai provider needs OPENAI_API_KEY (or OPENAI_BASE_URL)")
        self.name = f"openai:{model}"
        self.model = model
        self._client: Any = openai.OpenAI(
            api_key=api_key or "not-needed", base_url=base_url, timeout=timeout, max_retries=0
        )

    def complete(self, request: LLMRequest) -> LLMResponse:
        messages = openai_messages(request.system, request.messages)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
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
            if _transient(exc):
                raise TransientLLMError(f"{self.name}: {exc}") from exc
            raise LLMError(f"{self.name}: {exc}") from exc
        choice = response.choices[0]
        finish = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}.get(
            choice.finish_reason or "", choice.finish_reason or ""
        )
        calls = [
            {"id": c.id, "name": c.function.name, "input": c.function.arguments}
            for c in (choice.message.tool_calls or [])
        ]
        usage = response.usage
        return LLMResponse(
            text=choice.message.content or "",
            stop_reason=finish,
            tool_calls=calls,
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            model=response.model or self.model,
        )


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
                text = str(block.get("content", ""))
                text = f"[error] {text}" if block.get("is_error") else text
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        if texts:
            out.append({"role": message["role"], "content": "\n\n".join(texts)})
    return out
