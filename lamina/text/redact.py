"""Secrets never enter the bank: API keys, tokens, passwords and private keys are replaced by
`[REDACTED:<rule>]` before anything is stored, embedded or cut to length.

The rules are gitleaks' (https://github.com/gitleaks/gitleaks, MIT; its default config ships in
`lamina/data/gitleaks.toml`, with its licence beside it): about 220 rules, each with keywords
that must appear before its pattern runs, an entropy threshold for the secret it captures and
allowlists, applied as gitleaks applies them. A few rules of Lamina's own (`LAMINA_RULES`) cover
what an agent's transcript holds and a repository scan does not look for: `NAME_PASS=value`
assignments, `"password": "..."` in JSON, passwords in URLs and `curl -u`, `sshpass -p`,
`--password '...'`, any `Authorization:` header's credential, Azure `AccountKey=` and SAS
`sig=`, tokens in a URL's user part (Sentry DSNs), PuTTY private lines, a private key whose end
was cut off, and token formats gitleaks lacks (Discord bot, Docker, Doppler, Google OAuth
client secrets, Notion, short Vault tokens, FCM server keys).

Two changes to how gitleaks' patterns are read. A token may end a sentence or sit in brackets:
where gitleaks wants whitespace, a quote or the end after a secret, `. , : ; ! ? ) ] > }`
followed by one of those will do too. And the `[\\w.-]{0,50}?` that starts many patterns (the
rest of a name before its keyword) is left out of the search, which Python's `re` would
otherwise try at every position of a text, and put back for the allowlists that look at the
whole match.

Generic rules (a value that follows a name) skip what code says in that place: a call, an
attribute or a subscript (`len(tokens)`, `config.apiKey`, `request.form[...]`), a type
(`Optional[str]`, `AuthService`), a command substitution (`$(...)`), a number or a URL
without credentials.

Placeholders are not secrets: `your-key-here`, `<token>`, `${VAR}`, `changeme`, `xxxx...` and
the like are left as said and count no redaction. Add rules with `Redactor(extra={name:
pattern})` (the secret is the group named `value`, else the first group, else the match), or
turn redaction off with `Redactor(enabled=False)`.

Update the rules by replacing `lamina/data/gitleaks.toml` with a newer release's
`config/gitleaks.toml`; `tests/security/test_secrets.py` measures the result on a corpus.
"""

from __future__ import annotations

import math
import re
import tomllib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from .._json import map_strings
from ..messages import (
    Block,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnknownBlock,
)

__all__ = [
    "DEFAULT_PATTERNS",
    "LAMINA_RULES",
    "Redactor",
    "gitleaks_rules",
    "redact_json",
    "redact_message",
]


class _Lazy:
    """A pattern compiled on its first use: most rules never run on a short text (their
    keywords are not in it), and compiling all of gitleaks' costs a short-lived process (the
    prompt hook, which redacts the prompt it logs) about 40 ms of CPU."""

    __slots__ = ("_compiled", "source")

    def __init__(self, source: str) -> None:
        self.source = source
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        """The pattern; one Python cannot compile matches nothing (the rule is skipped, as
        gitleaks' RE2 syntax Python lacks would be)."""
        if self._compiled is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)  # RE2 classes like [[...]
                    self._compiled = re.compile(self.source)
            except re.error:
                self._compiled = re.compile("$^")
        return self._compiled

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled().groupindex

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(text)

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled().search(text)


Pattern = re.Pattern[str] | _Lazy
"""A rule's pattern, compiled now or on first use."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    regex: Pattern
    keywords: tuple[str, ...] = ()
    entropy: float = 0.0
    secret_group: int = 0
    allow: tuple[tuple[Pattern, str], ...] = ()
    """Allowlist patterns with their target: `secret`, `match` or `line`."""
    stopwords: tuple[str, ...] = ()
    generic: bool = False
    """Captures whatever value follows a name (`password = ...`): a value that looks like a
    name (`get_key`, `DB_PASSWORD`) or code (`config.api_key`) is not taken for a secret."""
    prefix: int = 0
    """How many name characters (`[\\w.-]`) before the match the pattern's leading
    `[\\w.-]{0,50}?` took, left out of the search (see `unprefixed`)."""


LAMINA_RULES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    # name: (pattern, keywords); the secret is the `value` group.
    "private-key-block": (
        r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"(?P<value>[\s\S]*?)(?:-----END[ A-Z0-9_-]{0,100}-----|\Z)",
        ("-----begin",),
    ),
    "url-password": (
        r"[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'`]{0,100}:(?P<value>[^\s@/\"'`]{3,200})@",
        ("://",),
    ),
    "assigned-secret": (
        r"(?i)(?<![a-z0-9])[a-z0-9_.-]{0,40}(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key"
        r"|access[_-]?key|private[_-]?key|credentials?|auth)[a-z0-9_.-]{0,30}"
        r"[\"']?\s{0,3}(?:=|:=|:|=>)\s{0,3}[\"'`]?(?P<value>[^\s\"'`,;]{6,400})",
        ("pass", "pwd", "secret", "token", "key", "credential", "auth"),
    ),
    "json-secret": (
        r"(?i)\"[a-z0-9_.-]{0,40}(?:pass(?:word|wd)?|secret|token|api[_-]?key|access[_-]?key"
        r"|private[_-]?key|credentials?)[a-z0-9_.-]{0,30}\"\s{0,3}:\s{0,3}\"(?P<value>[^\"]{4,400})\"",
        ("pass", "secret", "token", "key", "credential"),
    ),
    "basic-auth": (
        r"(?i)\bauthorization[\"']?\s{0,3}[:=]\s{0,3}[\"']?basic\s+(?P<value>[A-Za-z0-9+/=_-]{8,})",
        ("basic",),
    ),
    "authorization-header": (
        # Any other scheme (Bot, SSWS, Token...): the header's value is a credential.
        r"(?i)\bauthorization[\"']?\s{0,3}[:=]\s{0,3}[\"']?(?!basic\s|bearer\s)"
        r"(?:[a-z][a-z0-9-]{1,20}\s+)?"
        r"(?P<value>[A-Za-z0-9_\-.=~+/]{16,})",
        ("authorization",),
    ),
    "bearer-token": (
        r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9_\-.=~+/]{16,})",
        ("bearer",),
    ),
    "azure-account-key": (r"(?i)\bAccountKey=(?P<value>[A-Za-z0-9+/=]{20,})", ("accountkey",)),
    "azure-sas-signature": (r"[?&;\s\"']sig=(?P<value>[A-Za-z0-9%+/=]{20,200})", ("sig=",)),
    "cli-password": (
        r"(?:\s-p|\s--pass(?:word|wd)?(?:=|\s+)|\s-u\s+[^\s:]{1,64}:|\blogin\b[^\n]{0,200}?\s-p\s+)"
        r"[\"']?(?P<value>[^\s\"'`]{6,200})",
        (" -p", "--pass", " -u"),
    ),
    "sshpass": (
        r"\bsshpass\s+(?:-[a-zA-Z]+\s+)*-p\s*[\"']?(?P<value>[^\s\"'`]{3,200})",
        ("sshpass",),
    ),
    "url-token": (
        # A token as a URL's user (a Sentry DSN's key, `https://<token>@host/...`).
        r"\b[a-z][a-z0-9+.-]{1,20}://(?P<value>[A-Za-z0-9_~.-]{20,200})@",
        ("://",),
    ),
    "putty-private-lines": (
        r"Private-Lines:[ \t]*\d+[ \t]*\r?\n(?P<value>(?:[A-Za-z0-9+/=]+[ \t]*(?:\r?\n|\Z))+)",
        ("private-lines",),
    ),
    "cli-token": (
        r"(?:\s(?:-t|--token|--access-token)[= ])(?P<value>[A-Za-z0-9_\-.]{20,400})",
        (" -t", "--token", "--access-token"),
    ),
    # Known key prefixes, matched however the rest of the key looks.
    "anthropic-key": (r"\b(?P<value>sk-ant-[A-Za-z0-9_\-]{20,})", ("sk-ant-",)),
    "openai-key": (r"\b(?P<value>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,})", ("sk-",)),
    "github-token": (
        r"\b(?P<value>gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})",
        ("gh", "github_pat_"),
    ),
    "slack-token": (r"\b(?P<value>xox[abposr]-[A-Za-z0-9\-]{10,})", ("xox",)),
    "stripe-key": (r"\b(?P<value>[rs]k_(?:live|test)_[A-Za-z0-9]{16,})", ("k_live_", "k_test_")),
    "google-api-key": (r"\b(?P<value>AIza[0-9A-Za-z_\-]{35})", ("aiza",)),
    "jwt": (
        r"\b(?P<value>eyJ[A-Za-z0-9_\-]{10,}\.eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,})",
        ("eyj",),
    ),
    "stripe-webhook-secret": (r"\b(?P<value>whsec_[A-Za-z0-9+/=]{20,})", ("whsec_",)),
    "telegram-bot-token": (r"\b(?P<value>[0-9]{6,12}:AA[A-Za-z0-9_-]{30,40})\b", (":aa",)),
    "discord-bot-token": (
        # A user id in base64, a timestamp, an HMAC; no keyword, so the pattern is cheap.
        r"(?<![\w-])(?P<value>[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40})(?![\w-])",
        (),
    ),
    "docker-pat": (r"\b(?P<value>dckr_pat_[A-Za-z0-9_-]{20,})", ("dckr_pat_",)),
    "doppler-token": (
        r"\b(?P<value>dp\.(?:st|pt|ct|sa|scim|audit)\.(?:[a-z0-9_-]{1,40}\.)?[A-Za-z0-9]{40,44})",
        ("dp.",),
    ),
    "google-oauth-secret": (r"\b(?P<value>GOCSPX-[A-Za-z0-9_-]{28})", ("gocspx-",)),
    "notion-token": (
        r"\b(?P<value>secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,50})(?![A-Za-z0-9])",
        ("secret_", "ntn_"),
    ),
    "vault-token": (r"\b(?P<value>hv[sbr]\.[A-Za-z0-9_-]{20,})", ("hvs.", "hvb.", "hvr.")),
    "fcm-server-key": (
        r"\b(?P<value>AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,})",
        (":apa91b",),
    ),
}
"""Rules of Lamina's own (see the module's docstring)."""

DEFAULT_PATTERNS = LAMINA_RULES  # the name earlier versions exported

_ENTROPY = {"discord-bot-token": 3.0, "url-token": 3.0, "authorization-header": 3.0}
"""Lamina's rules that take a secret only above this entropy (as gitleaks' `entropy`)."""

_PLACEHOLDER = re.compile(
    r"(?ix)^(?:"
    r"[<\[{(].*[>\]})]"  # <token>, [secret], {{ var }}
    r"|\$\{?[a-z_][a-z0-9_]*\}?|%[a-z_]+%"  # $VAR, ${VAR}, %VAR%
    r"|(?:your|my|insert|enter|put|replace)(?:[-_ ][a-z0-9]+)+|your[a-z]+"  # your-key-here
    r"|.*(?:here|example|placeholder|dummy|sample|redacted|changeme|change[-_]me).*"
    r"|(?:x+|\*+|\.+|-+|0+|1234(?:5678?9?0?)?|abc(?:def)?|test|testing|none"
    r"|null|true|false|foobar|foo|bar|pass|admin|root|user|username|string|value|key"
    r"|os\.environ.*|os\.getenv.*|process\.env.*|env\..*|getenv.*|environ.*)"
    r")$"
)
_IDENTIFIER = re.compile(
    r"^(?:[A-Z]?[a-z]{1,19}|[A-Z]{1,19})$|^[a-z]+(?:[._-][a-z]+)*\(?\)?$|^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$"
)
"""Words, dotted or snake-case names and CONSTANT_NAMES: a name, not a value."""


_GENERIC = {
    "generic-api-key",
    "url-password",
    "url-token",
    "authorization-header",
    "assigned-secret",
    "json-secret",
    "basic-auth",
    "bearer-token",
    "cli-password",
    "cli-token",
}


_EXPRESSION = re.compile(
    r"(?s)[&*!]*(?P<head>[A-Za-z_$][\w$]*(?:(?:\??\.|::|->)[A-Za-z_$][\w$]*)*)"
    r"(?P<tail>[(\[<{].*|[!?]?[),;:\]}>]*)"
)
"""An expression: names joined by `.`, `?.`, `::` or `->`, maybe called or subscripted."""
_TYPE = re.compile(r"[&*]*(?:\[\w{0,8}\])+[\w.]*[),;]*")
"""A type like `&[u8]` or `[]byte`."""
_NUMBER = re.compile(r"-?[0-9]{1,12}(?:\.[0-9]+)?[),;:\]}>]*")
"""A number (`"maxThinkingTokens":31999}`): a count or a size, not a credential."""
_SEGMENT = re.compile(r"[A-Za-z_$]+[0-9]{0,3}")
_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


def _wordy(segment: str) -> bool:
    """A name made of words (`getItem`, `API_KEY`, `sha256`), not a random string."""
    if not _SEGMENT.fullmatch(segment):
        return False
    letters = segment.rstrip("0123456789")
    pieces = _PIECES.findall(letters)
    if len(letters.strip("_$")) <= 3 or not pieces:
        return True
    return sum(len(piece) for piece in pieces) >= 2.5 * len(pieces)


def looks_like_code(value: str) -> bool:
    """Whether what follows a name (`password = ...`) is code, not a literal: a call, an
    attribute, a subscript, a type, a command substitution, a number, a URL without
    credentials."""
    if value.startswith(("$(", "`")) or _TYPE.fullmatch(value) or _NUMBER.fullmatch(value):
        return True
    if re.match(r"[a-z][a-z0-9+.-]{1,20}://[^@\s]*$", value):
        return True
    found = _EXPRESSION.fullmatch(value)
    if found is None:
        return False
    segments = re.split(r"\??\.|::|->", found["head"])
    if not all(_wordy(segment) for segment in segments):
        return False
    if found["tail"][:1] in ("(", "[", "<", "{") or len(segments) > 1:
        return True
    return not any(c.isdigit() for c in segments[0])  # `AuthService`, not `hunter22`


def is_placeholder(secret: str, generic: bool = True) -> bool:
    value = secret.strip().strip("\"'`")
    if not value or value.startswith("[REDACTED"):
        return True
    if _PLACEHOLDER.match(value):
        return True
    if generic and (_IDENTIFIER.match(value) or looks_like_code(value)):
        return True
    return len(set(value.lower())) <= 2


def shannon_entropy(data: str) -> float:
    if not data:
        return 0.0
    counts: dict[str, int] = {}
    for char in data:
        counts[char] = counts.get(char, 0) + 1
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _group_end(pattern: str, start: int) -> int:
    """Where the group enclosing `start` closes (or the pattern's end)."""
    depth = 0
    i = start
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return len(pattern)


def go_to_python(pattern: str) -> str:
    """A Go RE2 pattern as Python's `re` reads it: `\\z` is `\\Z`, and an inline `(?i)` that is
    not at the start applies to the rest of its group."""
    pattern = pattern.replace(r"\z", r"\Z")
    while True:
        at = pattern.find("(?i)", 1)
        if at < 0:
            return pattern
        end = _group_end(pattern, at + 4)
        pattern = f"{pattern[:at]}(?i:{pattern[at + 4 : end]}){pattern[end:]}"


_ENDS = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
"""What gitleaks wants after a token: whitespace, a quote, `;`, an escaped newline, the end."""
_ENDS_AFTER_PUNCTUATION = r"""(?=[.,:;!?)\]>}]*(?:[\x60'"\s;]|\\[nr]|$))"""
"""The same, or sentence and bracket punctuation before it: `hf_... .`, `(npm_...)`."""
_NAME_PREFIX = r"[\w.-]{0,50}?"


def unprefixed(pattern: str) -> tuple[str, int]:
    """A gitleaks pattern without its leading `[\\w.-]{0,50}?` (also inside a leading `(?i)` or
    `(?i:`), and how many characters those could take. They only move the match's start back
    over a name, and Python's backtracking `re` tries them at every position (where Go's RE2
    does not): a rule like `okta-access-token` took seconds on a long text."""
    head = ""
    span = 0
    while True:
        if pattern.startswith(_NAME_PREFIX):
            pattern = pattern[len(_NAME_PREFIX) :]
            span += 50
        elif pattern.startswith(("(?i)", "(?i:")) and pattern[4:].startswith(_NAME_PREFIX):
            head += pattern[:4]
            pattern = pattern[4:]
        else:
            return head + pattern, span


def _match_start(rule: Rule, text: str, match: re.Match[str]) -> int:
    """Where the match would start with the name prefix `unprefixed` left out."""
    start = match.start()
    floor = max(0, start - rule.prefix)
    while start > floor and (text[start - 1].isalnum() or text[start - 1] in "_.-"):
        start -= 1
    return start


_Allow = list[tuple[Pattern, str]]


def _allow(entries: Sequence[Mapping[str, Any]]) -> tuple[_Allow, list[str]]:
    allow: _Allow = []
    stopwords: list[str] = []
    for entry in entries:
        if entry.get("paths") or entry.get("commits"):
            continue  # about files and commits, which a transcript has none of
        target = str(entry.get("regexTarget", "secret"))
        for regex in entry.get("regexes", ()):
            allow.append((_Lazy(go_to_python(regex)), target))
        stopwords += [str(w).lower() for w in entry.get("stopwords", ())]
    return allow, stopwords


@cache
def gitleaks_rules() -> tuple[tuple[Rule, ...], tuple[Rule, ...]]:
    """gitleaks' rules, and its global allowlist as a rule with no pattern."""
    # Read beside the package, not through importlib.resources: the prompt hook redacts the
    # prompt it logs (lamina.integrations.claude_code.injections) and must not load it.
    text = (Path(__file__).resolve().parent.parent / "data" / "gitleaks.toml").read_text("utf-8")
    config = tomllib.loads(text)
    rules: list[Rule] = []
    for item in config.get("rules", ()):
        if "regex" not in item:
            continue
        pattern, prefix = unprefixed(item["regex"].replace(_ENDS, _ENDS_AFTER_PUNCTUATION))
        regex = _Lazy(go_to_python(pattern))
        allow, stopwords = _allow(item.get("allowlists", ()))
        rules.append(
            Rule(
                id=item["id"],
                regex=regex,
                keywords=tuple(k.lower() for k in item.get("keywords", ())),
                entropy=float(item.get("entropy", 0.0)),
                secret_group=int(item.get("secretGroup", 0)),
                allow=tuple(allow),
                stopwords=tuple(stopwords),
                generic=item["id"] in _GENERIC,
                prefix=prefix,
            )
        )
    allow, stopwords = _allow([config.get("allowlist", {})])
    shared = Rule("global", re.compile("$^"), allow=tuple(allow), stopwords=tuple(stopwords))
    return tuple(rules), (shared,)


def _own_rules(extra: Mapping[str, str]) -> list[Rule]:
    rules = [
        Rule(
            name,
            re.compile(pattern),
            keywords=keywords,
            entropy=_ENTROPY.get(name, 0.0),
            generic=name in _GENERIC,
        )
        for name, (pattern, keywords) in LAMINA_RULES.items()
    ]
    rules += [Rule(name, re.compile(pattern)) for name, pattern in extra.items()]
    return rules


def _secret_span(rule: Rule, match: re.Match[str]) -> tuple[int, int]:
    if "value" in rule.regex.groupindex and match.group("value") is not None:
        return match.span("value")
    if rule.secret_group and (match.lastindex or 0) >= rule.secret_group:
        return match.span(rule.secret_group)
    for n in range(1, (match.lastindex or 0) + 1):
        if match.group(n):
            return match.span(n)
    start = match.start()
    return start, start + len(match.group(0).rstrip("\n"))


def _allowed(rule: Rule, secret: str, match: str, line: str) -> bool:
    lowered = secret.lower()
    if any(word in lowered for word in rule.stopwords):
        return True
    targets = {"secret": secret, "match": match, "line": line}
    return any(pattern.search(targets.get(target, secret)) for pattern, target in rule.allow)


@dataclass
class Redactor:
    enabled: bool = True
    extra: Mapping[str, str] = field(default_factory=dict)
    gitleaks: bool = True
    """Use gitleaks' rules (as well as Lamina's own)."""
    _own: list[Rule] = field(init=False, repr=False)
    _all: list[Rule] | None = field(init=False, repr=False, default=None)
    _global: Rule | None = field(init=False, repr=False, default=None)
    _keywords: dict[str, tuple[int, ...]] = field(init=False, repr=False, default_factory=dict)
    """Every keyword of the rules, once (a text is searched for each once, not per rule),
    with the rules that have it (their places in `_all`)."""
    _within: dict[str, tuple[str, ...]] = field(init=False, repr=False, default_factory=dict)
    """The keywords that hold another one (`apikey` holds `key`), under the longest they hold,
    so they are searched for only where it was found; those that hold none under `""`."""
    _always: tuple[int, ...] = field(init=False, repr=False, default=())
    """The rules without keywords, which look at every text."""

    def __post_init__(self) -> None:
        # Lamina's own rules and the extra ones now, so a bad extra pattern fails where it is
        # configured; gitleaks' (a quarter of a second of regex compiling) on the first text,
        # so opening a bank to recall from it never pays for them.
        self._own = _own_rules(self.extra)

    def _rules(self) -> list[Rule]:
        if self._all is None:
            found = self._own
            if self.gitleaks:
                rules, (shared,) = gitleaks_rules()
                self._global = shared
                found = [*rules, *self._own]
            # Keywords first: a thread that finds the rules set finds their keywords too.
            keywords: dict[str, list[int]] = {}
            for n, rule in enumerate(found):
                for keyword in rule.keywords:
                    keywords.setdefault(keyword, []).append(n)
            within: dict[str, list[str]] = {}
            for keyword in keywords:
                held = [k for k in keywords if k != keyword and k in keyword]
                within.setdefault(max(held, key=len, default=""), []).append(keyword)
            self._within = {k: tuple(v) for k, v in within.items()}
            self._keywords = {k: tuple(rules) for k, rules in keywords.items()}
            self._always = tuple(n for n, rule in enumerate(found) if not rule.keywords)
            self._all = found
        return self._all

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """The secrets of a text: (start, end, rule), overlaps merged, in order."""
        rules = self._rules()
        lowered = text.lower()
        chosen = set(self._always)
        pending = list(self._within.get("", ()))
        while pending:
            keyword = pending.pop()
            if keyword in lowered:
                chosen.update(self._keywords[keyword])
                pending += self._within.get(keyword, ())
        spans: list[tuple[int, int, str]] = []
        for n in sorted(chosen):
            rule = rules[n]
            for match in rule.regex.finditer(text):
                start, end = _secret_span(rule, match)
                secret = text[start:end]
                if not secret.strip() or is_placeholder(secret, rule.generic):
                    continue
                if rule.entropy and shannon_entropy(secret) <= rule.entropy:
                    continue
                if rule.allow or rule.stopwords or self._global is not None:
                    line_start = text.rfind("\n", 0, match.start()) + 1
                    line_end = text.find("\n", match.end())
                    line = text[line_start : line_end if line_end >= 0 else len(text)]
                    checks = [rule] if self._global is None else [rule, self._global]
                    whole = text[_match_start(rule, text, match) : match.end()]
                    if any(_allowed(r, secret, whole, line) for r in checks):
                        continue
                spans.append((start, end, rule.id))
        spans.sort()
        merged: list[tuple[int, int, str]] = []
        for start, end, name in spans:
            if merged and start < merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], end), last[2])
            else:
                merged.append((start, end, name))
        return merged

    def redact(self, text: str) -> tuple[str, int]:
        """The text with secrets replaced, and how many were replaced."""
        if not self.enabled or not text:
            return text, 0
        spans = self.find(text)
        if not spans:
            return text, 0
        out: list[str] = []
        at = 0
        for start, end, name in spans:
            out.append(text[at:start])
            out.append(f"[REDACTED:{name}]")
            at = end
        out.append(text[at:])
        return "".join(out), len(spans)


def redact_json(value: Any, redact: Callable[[str], str]) -> Any:
    """A JSON value with every string redacted; walked without recursion, so any depth works."""

    def one(item: str, key: str | None) -> str:
        if key is None:
            return redact(item)
        # `{"password": "..."}`: the name tells what the value is.
        pair = redact(f"{key}={item}")
        head = f"{key}="
        return pair[len(head) :] if pair.startswith(head) else redact(item)

    return map_strings(value, one)


def redact_message(message: Message, redactor: Redactor) -> tuple[Message, int]:
    """A message with secrets replaced in every block (text, thinking, tool inputs and
    results, unknown blocks), in Claude Code's tool result and in its source records; and how
    many were replaced."""
    if not redactor.enabled:
        return message, 0
    found = [0]

    def text(value: str) -> str:
        clean, count = redactor.redact(value)
        found[0] += count
        return clean

    def block(item: Block) -> Block:
        if isinstance(item, TextBlock):
            return TextBlock(text(item.text))
        if isinstance(item, ThinkingBlock):
            return replace(item, thinking=text(item.thinking))
        if isinstance(item, ToolUseBlock):
            return replace(item, input=redact_json(item.input, text))
        if isinstance(item, ToolResultBlock):
            return replace(item, content=tuple(block(b) for b in item.content))
        if isinstance(item, UnknownBlock):
            return replace(item, data=redact_json(item.data, text))
        return item

    clean = replace(
        message,
        blocks=tuple(block(b) for b in message.blocks),
        tool_use_result=redact_json(message.tool_use_result, text),
        records=tuple(redact_json(r, text) for r in message.records),
    )
    return (clean, found[0]) if found[0] else (message, 0)
