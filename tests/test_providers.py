"""The Anthropic and OpenAI providers over their real SDKs, served by a mock HTTP transport: the
request each sends, how their answers map to `LLMResponse` (text, stop reasons, usage, tool
calls, thinking), errors sorted into transient and not, and the model summariser end to end.

The answers are the APIs' documented JSON bodies; no network is used."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest

from lamina.context.ladder import NORMAL_STOPS, SYSTEM_PROMPT, ModelOptions, ModelSummariser
from lamina.context.requests import Recalled, SummaryRequest, SummaryResult
from lamina.errors import ConfigError
from lamina.llm import LLM, LLMError, LLMRequest, TransientLLMError, get_llm
from lamina.llm.providers import REDACTED_THINKING, AnthropicLLM, OpenAILLM, openai_messages
from lamina.messages import Kind, Message, Role, TextBlock, ToolResultBlock, ToolUseBlock

Answer = tuple[int, dict[str, Any]] | tuple[int, dict[str, Any], dict[str, str]] | Exception


@dataclass
class Server:
    """A fake provider API behind `httpx2.MockTransport`: answers with the scripted
    `(status, body[, headers])` in order (an exception is raised, as a transport would), and
    records every request."""

    answers: list[Answer]
    requests: list[httpx2.Request] = field(default_factory=list)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        assert self.answers, "the server has no answers left"
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        status, body, *headers = answer
        return httpx2.Response(status, json=body, headers=headers[0] if headers else None)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))

    def body(self, index: int = -1) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.requests[index].content)
        return parsed


@pytest.fixture(autouse=True)
def _no_sdk_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDKs read some settings from the environment themselves; keep the tests apart."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS",
        "ANTHROPIC_PROFILE",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_ORG_ID",
        "OPENAI_PROJECT_ID",
    ):
        monkeypatch.delenv(name, raising=False)


# -- the APIs' answers, as documented ---------------------------------------------------------


def anthropic_message(
    content: list[dict[str, Any]] | None = None,
    stop_reason: str = "end_turn",
    **usage: int,
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": content if content is not None else [{"type": "text", "text": "Hello."}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 120,
            "output_tokens": 8,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
            **usage,
        },
    }


def openai_completion(
    message: dict[str, Any] | None = None,
    finish_reason: str = "stop",
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Hello.",
                    "refusal": None,
                    "annotations": [],
                    **(message or {}),
                },
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    }
    if usage is not None:
        body["usage"] = usage
    else:
        body["usage"] = {
            "prompt_tokens": 120,
            "completion_tokens": 8,
            "total_tokens": 128,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
    return body


ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
OPENAI_ERRORS = {
    400: ("invalid_request_error", "invalid_value"),
    401: ("invalid_request_error", "invalid_api_key"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def anthropic_error(status: int) -> dict[str, Any]:
    kind = ANTHROPIC_ERRORS[status]
    return {
        "type": "error",
        "error": {"type": kind, "message": f"a {kind}"},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }


def openai_error(status: int) -> dict[str, Any]:
    kind, code = OPENAI_ERRORS[status]
    return {"error": {"message": f"a {kind}", "type": kind, "param": None, "code": code}}


def anthropic(server: Server, timeout: float = 60.0) -> AnthropicLLM:
    return AnthropicLLM(
        "claude-haiku-4-5", api_key="sk-ant-test", timeout=timeout, http_client=server.client()
    )


def openai(server: Server, base_url: str | None = None, timeout: float = 60.0) -> OpenAILLM:
    return OpenAILLM(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url=base_url,
        timeout=timeout,
        http_client=server.client(),
    )


@dataclass(frozen=True)
class Api:
    """One provider for the suites run across both: how to build it, its plain answer and its
    error bodies."""

    name: str
    build: Callable[..., LLM]
    answer: Callable[[], dict[str, Any]]
    error: Callable[[int], dict[str, Any]]
    overloaded: int


APIS = [
    Api("anthropic", anthropic, anthropic_message, anthropic_error, 529),
    Api("openai", openai, openai_completion, openai_error, 503),
]

HELLO = LLMRequest(system="Be brief.", messages=[{"role": "user", "content": "Hi."}])

TOOL_EXCHANGE: list[dict[str, Any]] = [
    {"role": "user", "content": [{"type": "text", "text": "Read config.toml."}]},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Reading it."},
        {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"path": "config.toml"}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "port = 8080"},
        {"type": "text", "text": "What is the port?"},
    ]},
]  # fmt: skip
READ_TOOL = {"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}


# -- Anthropic ------------------------------------------------------------------------------


def test_anthropic_sends_the_messages_request() -> None:
    server = Server([(200, anthropic_message())])
    request = LLMRequest(system="Be brief.", messages=TOOL_EXCHANGE, max_tokens=300)
    anthropic(server).complete(request)
    sent = server.requests[0]
    assert (sent.method, sent.url.path) == ("POST", "/v1/messages")
    # SDK 2 sends the key as a bearer token (earlier ones as x-api-key), with its API version.
    assert sent.headers["authorization"] == "Bearer sk-ant-test"
    assert sent.headers["anthropic-version"]
    assert server.body() == {  # no temperature: the current API refuses sampling settings
        "model": "claude-haiku-4-5",
        "system": "Be brief.",
        "messages": TOOL_EXCHANGE,
        "max_tokens": 300,
    }


def test_anthropic_declares_tools_only_when_asked_and_leaves_out_an_empty_system() -> None:
    server = Server([(200, anthropic_message())] * 2)
    llm = anthropic(server)
    llm.complete(LLMRequest(system="", messages=TOOL_EXCHANGE, tools=[READ_TOOL]))
    llm.complete(LLMRequest(system="", messages=TOOL_EXCHANGE, temperature=0.7))
    assert server.body(0)["tools"] == [READ_TOOL]
    assert "system" not in server.body(0)
    assert "tools" not in server.body(1)
    assert "temperature" not in server.body(1)


def test_anthropic_maps_a_text_answer() -> None:
    server = Server([(200, anthropic_message([
        {"type": "text", "text": "The port ", "citations": None},
        {"type": "text", "text": "is 8080."},
    ]))])  # fmt: skip
    response = anthropic(server).complete(HELLO)
    assert response.text == "The port is 8080."
    assert response.stop_reason == "end_turn"
    assert response.stop_reason in NORMAL_STOPS
    assert (response.input_tokens, response.output_tokens) == (120, 8)
    assert response.model == "claude-haiku-4-5-20251001"
    assert (response.thinking, list(response.tool_calls)) == ("", [])


def test_anthropic_counts_cached_input_with_the_rest() -> None:
    body = anthropic_message(cache_creation_input_tokens=1000, cache_read_input_tokens=3000)
    response = anthropic(Server([(200, body)])).complete(HELLO)
    assert response.input_tokens == 4120


@pytest.mark.parametrize(
    "stop",
    ["end_turn", "stop_sequence", "max_tokens", "tool_use", "pause_turn", "refusal",
     "model_context_window_exceeded"],
)  # fmt: skip
def test_anthropic_stop_reasons_are_kept(stop: str) -> None:
    response = anthropic(Server([(200, anthropic_message(stop_reason=stop))])).complete(HELLO)
    assert response.stop_reason == stop
    assert (stop in NORMAL_STOPS) == (stop in ("end_turn", "stop_sequence"))


def test_anthropic_maps_a_tool_call() -> None:
    server = Server([(200, anthropic_message([
        {"type": "text", "text": "Let me read it."},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9",
         "name": "Read", "input": {"path": "config.toml"}},
    ], stop_reason="tool_use"))])  # fmt: skip
    response = anthropic(server).complete(HELLO)
    assert response.stop_reason == "tool_use"
    assert response.text == "Let me read it."
    assert list(response.tool_calls) == [
        {"id": "toolu_01A09q90qw90lq917835lq9", "name": "Read", "input": {"path": "config.toml"}}
    ]


def test_anthropic_maps_thinking_blocks() -> None:
    server = Server([(200, anthropic_message([
        {"type": "thinking", "thinking": "The user wants the port.", "signature": "EqQBCgIYAhIM"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "It is 8080."},
    ]))])  # fmt: skip
    response = anthropic(server).complete(HELLO)
    assert response.thinking == f"The user wants the port.\n\n{REDACTED_THINKING}"
    assert response.text == "It is 8080."


def test_anthropic_redacted_thinking_alone_counts_as_thinking_only() -> None:
    """So the ladder asks again for plain prose rather than taking it for an empty answer."""
    server = Server([(200, anthropic_message([{"type": "redacted_thinking", "data": "Emw"}]))])
    response = anthropic(server).complete(HELLO)
    assert (response.text, response.thinking) == ("", REDACTED_THINKING)


# -- OpenAI ---------------------------------------------------------------------------------


def test_openai_sends_the_chat_request_with_blocks_converted() -> None:
    server = Server([(200, openai_completion())])
    request = LLMRequest(system="Be brief.", messages=TOOL_EXCHANGE, max_tokens=300)
    openai(server).complete(request)
    sent = server.requests[0]
    assert (sent.method, sent.url.host, sent.url.path) == (
        "POST", "api.openai.com", "/v1/chat/completions")  # fmt: skip
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert server.body() == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Read config.toml."},
            {"role": "assistant", "content": "Reading it.", "tool_calls": [
                {"id": "toolu_01", "type": "function",
                 "function": {"name": "Read", "arguments": '{"path":"config.toml"}'}},
            ]},
            {"role": "tool", "tool_call_id": "toolu_01", "content": "port = 8080"},
            {"role": "user", "content": "What is the port?"},
        ],
        "max_completion_tokens": 300,
        "temperature": 0.0,
    }  # fmt: skip
    assert server.body()["messages"] == openai_messages(request.system, request.messages)


def test_openai_compatible_servers_get_max_tokens_at_their_own_address() -> None:
    server = Server([(200, openai_completion())])
    llm = openai(server, base_url="http://localhost:8000/v1")
    llm.complete(LLMRequest(system="", messages=[{"role": "user", "content": "Hi."}]))
    sent = server.requests[0]
    assert (sent.url.host, sent.url.port, sent.url.path) == (
        "localhost", 8000, "/v1/chat/completions")  # fmt: skip
    body = server.body()
    assert body["max_tokens"] == 1024
    assert "max_completion_tokens" not in body
    assert body["messages"] == [{"role": "user", "content": "Hi."}]  # no empty system message


def test_openai_declares_tools_as_functions_only_when_asked() -> None:
    server = Server([(200, openai_completion())] * 2)
    llm = openai(server)
    llm.complete(LLMRequest(system="s", messages=TOOL_EXCHANGE, tools=[READ_TOOL]))
    llm.complete(LLMRequest(system="s", messages=TOOL_EXCHANGE, temperature=0.7))
    declared = {"name": "Read", "description": "Read a file.", "parameters": {"type": "object"}}
    assert server.body(0)["tools"] == [{"type": "function", "function": declared}]
    assert "tools" not in server.body(1)
    assert server.body(1)["temperature"] == 0.7


def test_openai_asks_again_without_the_temperature_a_model_refuses() -> None:
    refused = {"error": {
        "message": "Unsupported value: 'temperature' does not support 0.0 with this model. "
                   "Only the default (1) value is supported.",
        "type": "invalid_request_error", "param": "temperature", "code": "unsupported_value",
    }}  # fmt: skip
    server = Server([(400, refused), (200, openai_completion()), (200, openai_completion())])
    llm = openai(server)
    assert llm.complete(HELLO).text == "Hello."
    llm.complete(HELLO)
    assert [b.get("temperature") for b in map(server.body, range(3))] == [0.0, None, None]


def test_openai_maps_a_text_answer() -> None:
    response = openai(Server([(200, openai_completion({"content": "Port 8080."}))])).complete(HELLO)
    assert response.text == "Port 8080."
    assert response.stop_reason == "end_turn"
    assert response.stop_reason in NORMAL_STOPS
    assert (response.input_tokens, response.output_tokens) == (120, 8)
    assert response.model == "gpt-4.1-mini-2025-04-14"
    assert (response.thinking, list(response.tool_calls)) == ("", [])


@pytest.mark.parametrize(
    ("finish", "stop"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"),
     ("function_call", "tool_use"), ("content_filter", "refusal")],
)  # fmt: skip
def test_openai_finish_reasons_are_spelled_as_stop_reasons(finish: str, stop: str) -> None:
    body = openai_completion(finish_reason=finish)
    response = openai(Server([(200, body)])).complete(HELLO)
    assert response.stop_reason == stop
    assert (stop in NORMAL_STOPS) == (finish == "stop")


def test_openai_a_refusal_is_a_refusal_stop() -> None:
    body = openai_completion({"content": None, "refusal": "I can't help with that."})
    response = openai(Server([(200, body)])).complete(HELLO)
    assert (response.text, response.stop_reason) == ("", "refusal")


def test_openai_maps_tool_calls_with_their_arguments_parsed() -> None:
    body = openai_completion({"content": None, "tool_calls": [
        {"id": "call_abc", "type": "function",
         "function": {"name": "Read", "arguments": '{"path": "config.toml"}'}},
        {"id": "call_def", "type": "function",
         "function": {"name": "Grep", "arguments": '{"pattern": "port'}},
    ]}, finish_reason="tool_calls")  # fmt: skip
    response = openai(Server([(200, body)])).complete(HELLO)
    assert (response.text, response.stop_reason) == ("", "tool_use")
    assert list(response.tool_calls) == [
        {"id": "call_abc", "name": "Read", "input": {"path": "config.toml"}},
        {"id": "call_def", "name": "Grep", "input": {"arguments": '{"pattern": "port'}},
    ]


def test_openai_maps_a_custom_tool_call_with_its_free_form_input() -> None:
    body = openai_completion({"content": None, "tool_calls": [
        {"id": "call_x", "type": "custom", "custom": {"name": "patch", "input": "*** Begin"}},
    ]}, finish_reason="tool_calls")  # fmt: skip
    response = openai(Server([(200, body)])).complete(HELLO)
    assert list(response.tool_calls) == [
        {"id": "call_x", "name": "patch", "input": {"input": "*** Begin"}}
    ]


def test_openai_compatible_reasoning_is_thinking_and_missing_usage_is_zero() -> None:
    """vLLM and Ollama send the reasoning as a field of the message, and may send no usage."""
    body = openai_completion({"content": "", "reasoning_content": "Let me think."}, usage={})
    del body["usage"]
    response = openai(Server([(200, body)]), base_url="http://localhost:8000/v1").complete(HELLO)
    assert (response.text, response.thinking) == ("", "Let me think.")
    assert (response.input_tokens, response.output_tokens) == (0, 0)


def test_openai_messages_spells_tool_results_of_blocks_and_errors_as_text() -> None:
    messages = [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
         "content": [{"type": "text", "text": "no such file"}, {"type": "image"}]},
    ]}]  # fmt: skip
    assert openai_messages("", messages) == [
        {"role": "tool", "tool_call_id": "t1", "content": "[error] no such file\n[image]"}
    ]


# -- errors, both providers -----------------------------------------------------------------


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
@pytest.mark.parametrize("status", [429, "overloaded", 500])
def test_rate_limits_overload_and_server_errors_are_transient_and_tried_once(
    api: Api, status: int | str
) -> None:
    """The SDK's own retries are off (the ladder backs off itself): one request per call, even
    when the answer invites a retry."""
    code = api.overloaded if status == "overloaded" else int(status)
    headers = {"retry-after": "30", "x-should-retry": "true"}
    server = Server([(code, api.error(code), headers)])
    with pytest.raises(TransientLLMError) as caught:
        api.build(server).complete(HELLO)
    assert caught.value.status == code
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
@pytest.mark.parametrize("status", [400, 401])
def test_bad_requests_and_bad_keys_are_not_transient(api: Api, status: int) -> None:
    server = Server([(status, api.error(status))])
    with pytest.raises(LLMError) as caught:
        api.build(server).complete(HELLO)
    assert not isinstance(caught.value, TransientLLMError)
    assert caught.value.status == status
    assert str(caught.value).startswith(f"{api.name}:")
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
@pytest.mark.parametrize(
    "failure",
    [httpx2.ReadTimeout("timed out"), httpx2.ConnectError("connection refused")],
    ids=["timeout", "connect"],
)
def test_timeouts_and_lost_connections_are_transient(api: Api, failure: Exception) -> None:
    server = Server([failure])
    with pytest.raises(TransientLLMError) as caught:
        api.build(server).complete(HELLO)
    assert caught.value.status is None
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS, ids=lambda a: a.name)
def test_the_timeout_given_reaches_the_transport(api: Api) -> None:
    server = Server([(200, api.answer())])
    api.build(server, timeout=5.0).complete(HELLO)
    assert server.requests[0].extensions["timeout"] == dict.fromkeys(
        ("connect", "read", "write", "pool"), 5.0
    )


def test_an_answer_that_is_not_the_documented_shape_is_an_error() -> None:
    body = openai_completion()
    body["choices"] = []
    with pytest.raises(LLMError, match="no choices"):
        openai(Server([(200, body)])).complete(HELLO)


# -- construction ---------------------------------------------------------------------------


def test_get_llm_builds_the_providers_from_the_environment_given() -> None:
    llm = get_llm("anthropic:claude-haiku-4-5", {"ANTHROPIC_API_KEY": "k"})
    assert isinstance(llm, AnthropicLLM)
    assert llm.name == "anthropic:claude-haiku-4-5"
    local = get_llm("openai:qwen3", {"OPENAI_BASE_URL": "http://localhost:11434/v1"})
    assert isinstance(local, OpenAILLM)
    assert local.name == "openai:qwen3"
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_llm("anthropic:claude-haiku-4-5", {})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_llm("openai:gpt-4.1-mini", {})


# -- the model summariser end to end ----------------------------------------------------------


def _message(i: int, role: Role, kind: Kind, *blocks: Any) -> Message:
    return Message(id=f"m{i}", role=role, blocks=tuple(blocks), kind=kind)


CHUNK = (
    _message(2, Role.USER, Kind.PROMPT, TextBlock("Read config.toml.")),
    _message(3, Role.ASSISTANT, Kind.REPLY, ToolUseBlock("t1", "Read", {"path": "config.toml"})),
    _message(4, Role.USER, Kind.TOOL_ACTIVITY, ToolResultBlock("t1", (TextBlock("port = 8080"),))),
    _message(5, Role.ASSISTANT, Kind.REPLY, TextBlock("The port is 8080.")),
)
SUMMARY = "I read config.toml for the user: the server listens on port 8080."


def summary_request() -> SummaryRequest:
    return SummaryRequest(
        "summarise", 1, 2, 6, 100,
        head=(_message(0, Role.USER, Kind.PROMPT, TextBlock("Set up the server.")),
              _message(1, Role.ASSISTANT, Kind.REPLY, TextBlock("On it."))),
        recalled=(Recalled("L1-0", "I installed the server package."),),
        messages=CHUNK,
    )  # fmt: skip


def summariser(llm: LLM, slept: list[float] | None = None) -> ModelSummariser:
    sleep = (slept if slept is not None else []).append
    return ModelSummariser(llm, ModelOptions(window=8_000, max_tokens=500), sleep=sleep)


def test_the_model_summariser_over_anthropic_writes_a_summary() -> None:
    server = Server([(200, anthropic_message([{"type": "text", "text": SUMMARY}],
                                             input_tokens=900, output_tokens=20))])  # fmt: skip
    answer = summariser(anthropic(server)).write(summary_request())
    assert isinstance(answer, SummaryResult)
    assert answer.text == SUMMARY
    assert answer.stop_reason == "end_turn"
    assert (answer.calls, answer.input_tokens, answer.output_tokens) == (1, 900, 20)
    assert answer.summariser == "anthropic:claude-haiku-4-5"
    body = server.body()
    assert body["system"] == SYSTEM_PROMPT
    assert body["max_tokens"] == 500
    assert body["tools"][0]["name"] == "Read"  # the chunk calls it, so the request declares it
    messages = body["messages"]
    recall = messages.index(
        {"role": "user", "content": [{"type": "text", "text": "[CM] Recall memory L1-0."}]}
    )
    assert messages[recall + 1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I installed the server package."}],
    }
    assert messages[-1]["role"] == "user"
    assert messages[-1]["content"][-1]["text"].startswith("[CM] Write the memory")


def test_the_ladder_drops_tools_after_a_tool_call_and_backs_off_on_overload() -> None:
    server = Server([
        (529, anthropic_error(529)),
        (200, anthropic_message([{"type": "tool_use", "id": "toolu_1", "name": "Read",
                                  "input": {"path": "x"}}], stop_reason="tool_use")),
        (200, anthropic_message([{"type": "text", "text": SUMMARY}])),
    ])  # fmt: skip
    slept: list[float] = []
    answer = summariser(anthropic(server), slept).write(summary_request())
    assert isinstance(answer, SummaryResult)
    assert answer.text == SUMMARY
    assert len(server.requests) == 3
    assert len(slept) == 1  # one backoff, by the ladder, after the 529
    assert "tools" in server.body(1)
    assert "tools" not in server.body(2)  # asked again with tool activity spelled as text


def test_the_model_summariser_over_openai_writes_a_summary() -> None:
    server = Server([(200, openai_completion({"content": SUMMARY}))])
    answer = summariser(openai(server)).write(summary_request())
    assert isinstance(answer, SummaryResult)
    assert (answer.text, answer.stop_reason) == (SUMMARY, "end_turn")
    messages = server.body()["messages"]
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    recall = messages.index({"role": "user", "content": "[CM] Recall memory L1-0."})
    assert messages[recall + 1]["content"] == "I installed the server package."
    assert {"role": "tool", "tool_call_id": "t1", "content": "port = 8080"} in messages
