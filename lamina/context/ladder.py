"""`ModelSummariser`: summaries written by a language model (Anthropic or OpenAI-compatible),
with admission and a refusal ladder.

    summariser = ModelSummariser(get_llm("anthropic:claude-haiku-4-5"), ModelOptions(window=32_000))

Good for: abstraction. A model can say what a long exchange concluded, in the agent's own voice,
where the offline extractive summariser only keeps lines. Not good for: reproducibility, cost
and latency (every summary is a provider call, priced and capped here), or offline use. It is
never required: with nothing configured the compiler uses the extractive one.

Each request is as-of: the head raw, the summaries before the span as recall pairs (within a
recall budget, newest kept; a stretch with no summary shown raw among them, cut to its newest
messages when it does not fit whole), the chunk raw (or, to merge, the summaries to merge), and the
instruction. It is made valid for the provider with the compiler's own rules (render.py).

Admission: a request is priced (every token sent, separator turns and declared tools included,
with the longest retry line the ladder may add, plus the output allowance) and sent only if that
fits `window`; otherwise the oldest recalled summaries are dropped, then the chunk is split. A
request that cannot fit even so fails, and is logged, with its price part by part (`Price`).

The ladder, when an answer is not a normal stop with text: a tool call is asked again with no
tools declared (tool activity then spelled as text); an answer of thinking only is asked again
for plain prose; then the summary just before the chunk expanded (shown as what it stands for,
one level down: its children, or its chunk raw); then a smaller request (half the recalled
summaries); then one with no recall pairs at all; then the chunk in halves,
each summarised on its own (the second recalls the first) and joined; finally a failure is
returned, recorded with the keys that would make a retry worth it. Transient provider errors
back off and retry without using a rung, up to `transient_retries`; past that, and when a call
would go over a spend cap (it is then not sent), the failure is deferred: retried later.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from ..llm import LLM, NORMAL_STOPS, LLMError, LLMRequest, LLMResponse, TransientLLMError
from ..llm.spend import InMemorySpendLedger, SpendLedger, over_cap
from ..messages import Message, Role
from ..tokens import count_text
from .render import (
    IMAGE_PLACEHOLDER,
    OPENING,
    RECALL_PROMPT,
    Turn,
    message_blocks,
    request_tokens,
    resolve_turns,
)
from .requests import (
    PROMPT_VERSION,
    RawStretch,
    Recalled,
    RecallItem,
    SummaryFailure,
    SummaryRequest,
    SummaryResult,
)

__all__ = [
    "PROSE_RETRY",
    "SYSTEM_PROMPT",
    "ModelOptions",
    "ModelSummariser",
    "Price",
    "declared_tools",
    "summary_messages",
]


logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You keep the memory of a long conversation between a user and an AI agent. When asked, "
    "write what the agent needs to remember of the part of the conversation named, in the "
    "agent's own voice (first person), as plain prose: what was asked, what was decided and "
    "why, what was done (files, commands, results), what is still open. Keep names, paths, "
    "numbers and identifiers exactly. Do not call tools."
)

SUMMARISE = (
    "[CM] Write the memory of the conversation since {since}, up to here, in about {target} "
    "tokens. Answer with the memory text only."
)
MERGE = (
    "[CM] Write one memory that stands for the recalled memories {ids}, in about {target} "
    "tokens, keeping what a later reader needs. Answer with the memory text only."
)
RECALL_RAW = "[CM] Recall messages {first}-{last} as they were."
"""Before a stretch with no summary, shown raw among the recall pairs ..."""
RECALL_RAW_END = "[CM] End of messages {first}-{last}."
"""... and after it, so the model sees where the stretch ends and what follows begins."""
PROSE_RETRY = "Write it now as plain prose: no thinking aloud, no tool calls, only the memory."
RETRY_LINES = (PROSE_RETRY,)
"""Lines the ladder may add to the instruction; admission makes room for the longest."""


@dataclass(frozen=True, slots=True)
class ModelOptions:
    window: int = 32_000
    """`compression_context_budget`: no request, with its longest retry and its output, is
    larger."""
    max_tokens: int = 2_000
    """The output allowance of each call."""
    recall_share: float = 0.25
    """The recalled summaries may take this share of the window (newest kept)."""
    transient_retries: int = 4
    backoff: float = 2.0
    """Seconds before the first retry after a transient error, doubling each time."""
    backoff_max: float = 60.0
    split_depth: int = 3
    """How many times the ladder may halve a chunk."""
    tokens_per_hour: int | None = None
    tokens_per_day: int | None = None


@dataclass(frozen=True, slots=True)
class Price:
    """What admission charges for a request, part by part (tokens)."""

    prompt: int
    """Everything sent bar the recalled summaries and the retry line: the system prompt and the
    instruction, the head, and the chunk (or the summaries to merge)."""
    head: int
    """The part of `prompt` the head takes."""
    recalled: int
    retry_line: int
    output: int
    """The output allowance (`max_tokens`)."""

    @property
    def total(self) -> int:
        return self.prompt + self.recalled + self.retry_line + self.output

    def describe(self) -> str:
        return (
            f"{self.total} tokens: prompt {self.prompt} (head {self.head}, the span and the "
            f"instructions {self.prompt - self.head}), recalled summaries {self.recalled}, "
            f"retry line {self.retry_line}, output allowance {self.output}"
        )


class _Deferred(Exception):
    pass


class _Failed(Exception):
    pass


@dataclass
class _Run:
    """One `write`: what it spent and sent."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    digest: Any = None

    def __post_init__(self) -> None:
        self.digest = hashlib.sha256()


def _as_text(block: Mapping[str, Any]) -> dict[str, Any]:
    """A tool block spelled as text, for a request that declares no tools."""
    if block.get("type") == "tool_use":
        arguments = orjson.dumps(block.get("input", {})).decode()
        return {"type": "text", "text": f"[tool call {block['name']} {arguments}]"}
    if block.get("type") == "tool_result":
        error = " (error)" if block.get("is_error") else ""
        return {"type": "text", "text": f"[tool result{error}] {block.get('content', '')}"}
    return dict(block)


def summary_messages(
    request: SummaryRequest,
    instruction: str,
    *,
    largest: int,
    tools: bool = True,
) -> list[dict[str, Any]]:
    """The request as provider messages (content as Anthropic-style blocks): the head raw, the
    recalled summaries as recall pairs, then for `summarise` the chunk raw, for `merge` the
    summaries to merge as recall pairs, and last the user `instruction`. With `tools` False, tool
    calls and results are spelled as text (for a request that declares no tools). Raw messages
    over `largest` tokens are cut with a marker."""
    turns: list[Turn] = []

    def raw(messages: Sequence[Message]) -> None:
        for message in messages:
            content = [
                {"type": "text", "text": IMAGE_PLACEHOLDER} if b.get("type") == "image" else b
                for b in message_blocks(message, largest)
            ]
            if content:
                role = "user" if message.role is Role.USER else "assistant"
                turns.append(Turn(role, content))

    def recall(items: Sequence[RecallItem]) -> None:
        for item in items:
            if isinstance(item, RawStretch):  # no summary of it: shown as it was
                span = {"first": item.start, "last": item.end - 1}
                turns.append(Turn("user", [{"type": "text", "text": RECALL_RAW.format(**span)}]))
                raw(item.messages)
                end = RECALL_RAW_END.format(**span)
                turns.append(Turn("user", [{"type": "text", "text": end}]))
                continue
            prompt = RECALL_PROMPT.format(id=item.id)
            turns.append(Turn("user", [{"type": "text", "text": prompt}]))
            turns.append(Turn("assistant", [{"type": "text", "text": item.text}], True))

    raw(request.head)
    recall(request.recalled)
    if request.task == "summarise":
        raw(request.messages)
    else:
        recall(request.summaries)
    turns.append(Turn("user", [{"type": "text", "text": instruction}]))
    resolved = resolve_turns(turns)
    if resolved and resolved[0].role != "user":
        resolved.insert(0, Turn("user", [{"type": "text", "text": OPENING}]))
    out: list[dict[str, Any]] = []
    for turn in resolved:
        content = [dict(b) if tools else _as_text(b) for b in turn.content]
        out.append({"role": turn.role, "content": content})
    return out


def declared_tools(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Definitions for the tools the messages call (a request holding tool calls declares
    them), in order of first use."""
    names: list[str] = []
    for message in messages:
        for block in message["content"]:
            if block.get("type") == "tool_use" and block["name"] not in names:
                names.append(block["name"])
    return [
        {"name": n, "description": "A tool the agent used.", "input_schema": {"type": "object"}}
        for n in names
    ]


def _usable(response: LLMResponse) -> bool:
    return response.stop_reason in NORMAL_STOPS and bool(response.text.strip())


def _describe(response: LLMResponse) -> str:
    if response.tool_calls:
        return "answered with a tool call"
    if response.thinking and not response.text.strip():
        return "answered with thinking only"
    if not response.text.strip():
        return f"answered with no text (stop: {response.stop_reason or 'none'})"
    return f"stopped with {response.stop_reason or 'no stop reason'}"


class ModelSummariser:
    """A summariser over a language model (see the module's doc). `ledger` keeps what was
    spent (shared with other summarisers of the process, or store-backed); `sleep` and `clock`
    are for tests."""

    prompt_version = PROMPT_VERSION

    def __init__(
        self,
        llm: LLM,
        options: ModelOptions | None = None,
        *,
        ledger: SpendLedger | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.llm = llm
        self.options = options or ModelOptions()
        self.ledger: SpendLedger = ledger if ledger is not None else InMemorySpendLedger()
        self.sleep = sleep
        self.clock = clock

    @property
    def name(self) -> str:
        return self.llm.name

    @property
    def window(self) -> int:
        return self.options.window

    # -- building and pricing -------------------------------------------------------------

    def instruction(self, request: SummaryRequest, retry_line: str = "") -> str:
        if request.task == "summarise":
            last = request.recalled[-1] if request.recalled else None
            if isinstance(last, RawStretch):
                since = f"the recalled messages {last.start}-{last.end - 1}"
            else:
                since = f"memory {last.id}" if last is not None else "the opening"
            text = SUMMARISE.format(since=since, target=request.target_tokens)
        else:
            ids = ", ".join(s.id for s in request.summaries)
            text = MERGE.format(ids=ids, target=request.target_tokens)
        return f"{text}\n\n{retry_line}" if retry_line else text

    def _largest(self) -> int:
        return max(200, (self.options.window - self.options.max_tokens) // 3)

    def build(
        self, request: SummaryRequest, *, tools: bool = True, retry_line: str = ""
    ) -> LLMRequest:
        """The provider request for `request` (tools declared when it holds tool calls and
        `tools` is True; otherwise tool activity spelled as text)."""
        messages = summary_messages(
            request, self.instruction(request, retry_line), largest=self._largest(), tools=tools
        )
        return LLMRequest(
            system=SYSTEM_PROMPT,
            messages=messages,
            max_tokens=self.options.max_tokens,
            tools=declared_tools(messages) if tools else (),
        )

    @staticmethod
    def sent_tokens(request: LLMRequest) -> int:
        """Tokens of everything sent: system, messages (separator turns included), tools."""
        tokens = request_tokens({"system": request.system, "messages": list(request.messages)})
        if request.tools:
            tokens += count_text(orjson.dumps(list(request.tools)).decode())
        return tokens

    def _sent_max(self, request: SummaryRequest, line: str) -> int:
        """The larger of the request's two forms (tools declared, or spelled as text)."""
        forms = [self.build(request, tools=t, retry_line=line) for t in (True, False)]
        return max(self.sent_tokens(f) for f in forms)

    def price(self, request: SummaryRequest, *, with_retry_line: bool = True) -> int:
        """What admission charges for `request`: the larger of its two forms (tools declared,
        or spelled as text), with the longest retry line the ladder may add, plus the output
        allowance."""
        line = max(RETRY_LINES, key=count_text) if with_retry_line else ""
        return self._sent_max(request, line) + self.options.max_tokens

    def price_parts(self, request: SummaryRequest) -> Price:
        """`price(request)` broken down: what the prompt, the recalled summaries, the retry
        line and the output allowance each take (`Price.total` is the price)."""
        bare = replace(request, recalled=())
        prompt = self._sent_max(bare, "")
        recalled = self._sent_max(request, "")
        with_line = self._sent_max(request, max(RETRY_LINES, key=count_text))
        headless = self._sent_max(replace(bare, head=()), "")
        return Price(
            prompt=prompt,
            head=prompt - headless,
            recalled=recalled - prompt,
            retry_line=with_line - recalled,
            output=self.options.max_tokens,
        )

    def admit(self, request: SummaryRequest) -> SummaryRequest | None:
        """The request with as many recalled summaries (newest first, within the recall
        budget) as fit the window; None when it does not fit even with none."""
        recall_budget = int(self.options.window * self.options.recall_share)
        kept: list[RecallItem] = []
        used = 0
        for item in reversed(request.recalled):
            cost = (item.cost if isinstance(item, RawStretch) else count_text(item.text)) + 16
            if used + cost > recall_budget:
                # A raw stretch keeps its newest messages that fit; nothing older goes in.
                if isinstance(item, RawStretch):
                    newest = item.newest(recall_budget - used - 16)
                    if newest is not None:
                        kept.append(newest)
                break
            used += cost
            kept.append(item)
        kept.reverse()
        while True:
            candidate = replace(request, recalled=tuple(kept))
            if self.price(candidate) <= self.options.window:
                return candidate
            if not kept:
                return None
            kept.pop(0)

    # -- calling ----------------------------------------------------------------------------

    def _check_caps(self, cost: int) -> None:
        options = self.options
        reason = over_cap(
            self.ledger,
            self.name,
            cost,
            self.clock(),
            options.tokens_per_hour,
            options.tokens_per_day,
        )
        if reason is not None:
            raise _Deferred(reason)

    def _call(self, run: _Run, request: LLMRequest) -> LLMResponse:
        sent = self.sent_tokens(request)
        last: Exception | None = None
        for attempt in range(self.options.transient_retries + 1):
            self._check_caps(sent + request.max_tokens)
            run.digest.update(orjson.dumps([request.system, list(request.messages)]))
            try:
                response = self.llm.complete(request)
            except TransientLLMError as exc:
                last = exc
                if attempt < self.options.transient_retries:
                    self.sleep(min(self.options.backoff_max, self.options.backoff * 2**attempt))
                continue
            except LLMError as exc:
                response = LLMResponse(text="", stop_reason=f"error: {exc}")
            used_in = response.input_tokens or sent
            used_out = response.output_tokens or count_text(response.text + response.thinking)
            run.calls += 1
            run.input_tokens += used_in
            run.output_tokens += used_out
            self.ledger.record(self.name, used_in, used_out, self.clock())
            return response
        raise _Deferred(
            f"transient errors {self.options.transient_retries + 1} times in a row: {last}"
        )

    def _ask(self, run: _Run, request: SummaryRequest) -> tuple[LLMResponse, bool, bool]:
        """The first rungs on one admitted request: as is, then without tools, then asking for
        plain prose. Returns the last answer and whether tools and the prose line were still
        in use."""
        tools, line = True, ""
        while True:
            response = self._call(run, self.build(request, tools=tools, retry_line=line))
            if _usable(response):
                return response, tools, bool(line)
            if (response.tool_calls or response.stop_reason == "tool_use") and tools:
                tools = False
                continue
            if response.thinking and not response.text.strip() and not line:
                line = PROSE_RETRY
                continue
            return response, tools, bool(line)

    def _solve(self, run: _Run, request: SummaryRequest, depth: int) -> tuple[str, str]:
        admitted = self.admit(request)
        if admitted is None:
            halves = _halves(request)
            if halves is None:
                reason = self._unfit(replace(request, recalled=()))
                logger.warning("%s: %s", self.name, reason)
                raise _Failed(reason)
            return self._split(run, request, halves, depth)
        response, tools, prose = self._ask(run, admitted)
        if _usable(response):
            return response.text.strip(), response.stop_reason
        reason = _describe(response)
        line = PROSE_RETRY if prose else ""
        for variant in self._variants(admitted):
            response = self._call(run, self.build(variant, tools=tools, retry_line=line))
            if _usable(response):
                return response.text.strip(), response.stop_reason
            reason = _describe(response)
        halves = _halves(admitted)
        if halves is not None and depth < self.options.split_depth:
            try:
                return self._split(run, admitted, halves, depth + 1)
            except _Failed as exc:
                reason = f"{reason}; split in halves: {exc}"
        raise _Failed(reason)

    def _variants(self, admitted: SummaryRequest) -> list[SummaryRequest]:
        """The rungs after a refusal, before the chunk is split, each a request admission
        lets through: the summary recalled last expanded (shown as what it stands for, one
        level down); half the recalled items, newest kept; no recall at all."""
        out: list[SummaryRequest] = []
        recalled = tuple(admitted.recalled)
        last = recalled[-1] if recalled else None
        if admitted.expansion and isinstance(last, Recalled) and last.id == admitted.expands:
            expanded = replace(
                admitted, recalled=(*recalled[:-1], *admitted.expansion), expansion=(), expands=""
            )
            fits = self.admit(expanded)
            if fits is not None and fits.recalled != recalled:
                out.append(fits)
        if len(recalled) >= 2:
            out.append(replace(admitted, recalled=recalled[len(recalled) - len(recalled) // 2 :]))
        if recalled:
            out.append(replace(admitted, recalled=()))
        return out

    def _unfit(self, request: SummaryRequest) -> str:
        """Why admission refused a request that cannot be split: its price, part by part."""
        span = f"messages {request.start}-{request.end - 1}"
        what = "summary" if request.task == "summarise" else f"level-{request.level} merge"
        return (
            f"the {what} request for {span} cannot fit the window of {self.options.window} tokens "
            f"(nor be split further): admission priced it at {self.price_parts(request).describe()}"
        )

    def _split(
        self,
        run: _Run,
        request: SummaryRequest,
        halves: tuple[SummaryRequest, SummaryRequest],
        depth: int,
    ) -> tuple[str, str]:
        first, second = halves
        first_text, first_stop = self._solve(run, first, depth)
        mark = f"{request.level}-{first.start}-{first.end}"
        second = replace(second, recalled=(*second.recalled, Recalled(f"part-{mark}", first_text)))
        second_text, second_stop = self._solve(run, second, depth)
        return f"{first_text}\n\n{second_text}", f"split:{first_stop},{second_stop}"

    # -- the protocol ---------------------------------------------------------------------

    def write(self, request: SummaryRequest) -> SummaryResult | SummaryFailure:
        run = _Run()
        deferred = False
        try:
            text, stop = self._solve(run, request, 0)
        except _Deferred as exc:
            reason, deferred = str(exc), True
        except _Failed as exc:
            reason = str(exc)
        else:
            return SummaryResult(
                text=text,
                stop_reason=stop,
                summariser=self.name,
                input_tokens=run.input_tokens,
                output_tokens=run.output_tokens,
                calls=run.calls,
                request_hash=run.digest.hexdigest(),
            )
        return SummaryFailure(
            task=request.task,
            level=request.level,
            start=request.start,
            end=request.end,
            summariser=self.name,
            window=self.options.window,
            prompt_version=self.prompt_version,
            reason=reason,
            deferred=deferred,
            at=self.clock(),
            input_tokens=run.input_tokens,
            output_tokens=run.output_tokens,
            calls=run.calls,
        )

    def summarise(self, messages: Sequence[Message], target_tokens: int) -> str:
        """A context-free summary; raises `LLMError` when none could be written."""
        request = SummaryRequest("summarise", 1, 0, len(messages), target_tokens, messages=messages)
        return _text(self.write(request))

    def merge(self, summaries: Sequence[str], target_tokens: int) -> str:
        """A context-free merge; raises `LLMError` when none could be written."""
        items = tuple(Recalled(f"M{i}", s) for i, s in enumerate(summaries))
        request = SummaryRequest("merge", 2, 0, len(items), target_tokens, summaries=items)
        return _text(self.write(request))


def _text(answer: SummaryResult | SummaryFailure) -> str:
    if isinstance(answer, SummaryFailure):
        raise LLMError(f"{answer.summariser}: no summary ({answer.reason})")
    return answer.text


def _halves(request: SummaryRequest) -> tuple[SummaryRequest, SummaryRequest] | None:
    """The request's chunk (or summaries to merge) in two halves by tokens; None for one."""
    if request.task == "summarise":
        items: Sequence[Any] = request.messages
        sizes = [count_text(orjson.dumps([str(b) for b in m.blocks]).decode()) for m in items]
    else:
        items = request.summaries
        sizes = [count_text(s.text) for s in items]
    if len(items) < 2:
        return None
    total, running, cut = sum(sizes), 0, 1
    for index, size in enumerate(sizes[:-1]):
        running += size
        cut = index + 1
        if running * 2 >= total:
            break
    target = max(40, request.target_tokens // 2)
    if request.task == "summarise":
        first = replace(request, end=request.start + cut, messages=tuple(items[:cut]),
                        target_tokens=target)  # fmt: skip
        second = replace(request, start=request.start + cut, messages=tuple(items[cut:]),
                         target_tokens=target)  # fmt: skip
    else:
        first = replace(request, summaries=tuple(items[:cut]), target_tokens=target)
        second = replace(request, summaries=tuple(items[cut:]), target_tokens=target)
    return first, second
