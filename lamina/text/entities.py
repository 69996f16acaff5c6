"""Names and identifiers: the entities a memory mentions, for recall's entity channel.

Lexical search cuts text into stemmed words, which loses exactly what names are:
`INKWELL_DB_PATH` becomes `inkwel db path`, `lamina/bank/recall.py` becomes four common words,
and "Dr. Seuss" or the book "Nothing Is Impossible" lose their words' link. Entities keep them
whole, lowercased, so a query that names one finds the memories that name it:

- **identifiers**: words joined by `_`, `.`, `/`, `::` or `-` with at least one of `_ . / ::`
  (`INKWELL_DB_PATH`, `os.environ`, `src/app.py`, `--dry-run` is not one), CamelCase words
  (`SessionStore`, `getUserName`), and words with a digit inside letters (`gpt4o`, `utf8`). A path
  also yields its last part (`lamina/bank/recall.py` -> `recall.py`), so the file name alone
  finds it;
- **names**: runs of capitalised words in prose (`Dr. Seuss`, also `Seuss`; `New York`, `Golden
  Gate Bridge`; a possessive's `'s` dropped). The first word of a sentence counts only when it is
  not a common word (a stop word or one of a few dozen sentence starters such as "Thanks" or
  "Yeah"); month and day names are left to the time channel; a speaker's label ("Caroline:" at
  the start of a line) is not read as a name, but a memory's speakers are among its entities;
- **titles**: text in double quotes or backticks of two to six words.

The same function reads queries, so a query's entities are found the way memories' were.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from .lexical import LINE_CACHED, STOP_WORDS

__all__ = ["ENTITY_PREFIX", "entity_terms", "extract_entities"]

ENTITY_PREFIX = "\x01"
"""Marks an entity among a memory's index terms; `lexical.tokenize` never produces it."""

MAX_ENTITIES = 64
"""Entities kept per memory (the first found)."""

_IDENT = re.compile(
    r"(?<![\w./:-])"
    r"(?:[~.]{0,2}/)?[A-Za-z0-9_$.][\w$-]*(?:(?:::|[./])[\w$-]+)+/?"  # dotted, pathed, ::
    r"|(?<![\w./:-])[A-Za-z0-9$]*_[\w$]*"  # snake_case, SCREAMING_CASE
    r"|\b[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*\b"  # CamelCase, camelCase
    r"|\b[A-Z]{2,}[a-z][A-Za-z0-9]*\b"  # HTTPServer
    r"|\b[A-Za-z]+[0-9]+[A-Za-z][A-Za-z0-9]*\b"  # utf8x, gpt4o
)
_NAME_WORD = r"(?:[A-Z][\w'\u2019&-]*\.?|[A-Z]\.)"
_NAME = re.compile(rf"(?<![\w/.])({_NAME_WORD}(?:[ \t]+{_NAME_WORD})*)(?![\w/])")
_QUOTED = re.compile(r"[\"“`]([^\"”`\n]{3,80})[\"”`]")
_SPEAKER = re.compile(r"^[ \t]*[^:\n]{1,40}:[ \t]", re.MULTILINE)

COMMON_STARTS = frozenset(
    """hey hi hello oh ah wow yeah yes yep no nope ok okay sure thanks thank great cool nice
    awesome amazing well so also and but right really good glad sorry sounds that's it's i'm
    i've i'd i'll you're we're they're there's here's what's let's definitely absolutely
    totally haha lol congrats congratulations aw aww omg btw please maybe actually anyway
    hmm hm yup true exactly love done see let check now just note next first then whose
    according""".split()  # noqa: SIM905
)


CALENDAR = frozenset(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday today yesterday tomorrow""".split()  # noqa: SIM905
)
_POSSESSIVE = re.compile(r"['\u2019]s?$")


def _is_common(word: str) -> bool:
    w = word.lower().rstrip(".").replace("\u2019", "'")
    return w in STOP_WORDS or w in COMMON_STARTS or w.split("'")[0] in STOP_WORDS


def _at_sentence_start(text: str, pos: int) -> bool:
    before = text[:pos].rstrip(" \t\"\u201c\u2018'([*-")
    return not before or before[-1] in ".!?…:;\n"


_ABBREVIATION = re.compile(r"(?:[A-Z]|Dr|Mr|Mrs|Ms|St|Jr|Sr|Prof|Mt)\.")


def _runs(text: str) -> Iterable[tuple[int, list[str]]]:
    """Runs of capitalised words with where each starts, cut where a sentence ends."""
    for match in _NAME.finditer(text):
        pos, run = match.start(1), []
        for word in re.finditer(r"\S+", match.group(1)):
            run.append(word.group(0))
            if word.group(0).endswith(".") and not _ABBREVIATION.fullmatch(word.group(0)):
                yield pos, run
                pos, run = match.start(1) + word.end() + 1, []
        if run:
            yield pos, run


def _names(text: str) -> Iterable[str]:
    for pos, run in _runs(text):
        words = run
        if _at_sentence_start(text, pos):
            # The first word of a sentence is only a name when it is not a common word.
            while words and _is_common(words[0]):
                words = words[1:]
        while words and _is_common(words[-1]):
            words = words[:-1]
        words = [_POSSESSIVE.sub("", w.rstrip(".") if len(w) > 2 else w) for w in words]
        if not words or (len(words) == 1 and len(words[0]) < 2):
            continue
        if len(words) == 1 and words[0].lower() in CALENDAR:
            continue  # the time channel reads dates
        yield " ".join(words)
        if len(words) > 1 and _ABBREVIATION.fullmatch(run[0]):
            yield " ".join(words[1:])  # "Dr. Seuss" is also "Seuss"


def _identifiers(text: str) -> Iterable[str]:
    for match in _IDENT.finditer(text):
        ident = match.group(0).rstrip(".-/")
        core = ident.strip("_-.$~/")
        if len(core) < 3 or not any(c.isalpha() for c in core):
            continue
        if "/" in ident and "." not in ident and ident[0] not in "/~" and ident.count("/") < 2:
            continue  # "and/or", "artists/bands": prose, not a path
        if max(len(part) for part in re.split(r"[./:]", core)) < 2:
            continue  # "e.g.", "U.S."
        if re.fullmatch(r"[\d.]+[A-Za-z]{0,3}", core):
            continue  # a version or a number with a unit
        yield ident
        if "/" in ident:
            tail = ident.rsplit("/", 1)[1]
            if len(tail) >= 3:
                yield tail


def extract_entities(text: str, speakers: Iterable[str] = ()) -> tuple[str, ...]:
    """The entities of a text, lowercased, each once, in order of first mention; `speakers`
    (a memory's speakers) are entities too."""
    found: dict[str, None] = {}

    def add(entity: str) -> None:
        key = " ".join(entity.lower().split())
        if key and len(found) < MAX_ENTITIES:
            found.setdefault(key, None)

    for speaker in speakers:
        add(speaker)
    # No entity spans a line break, so a text's are its lines', read line by line (and
    # remembered: a window repeats the lines of the units it joins), in the same order.
    lines = [
        _line_entities(line) if len(line) <= LINE_CACHED else _read_line(line)
        for line in text.split("\n")
    ]
    for kind in range(3):  # identifiers, then titles, then names
        for found_in_line in lines:
            for entity in found_in_line[kind]:
                add(entity)
    return tuple(found)


_LineEntities = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def _read_line(line: str) -> _LineEntities:
    """A line's identifiers, titles and names, each in order of mention."""
    prose = _SPEAKER.sub(lambda m: " " * len(m.group(0)), line)
    identifiers = tuple(_identifiers(prose))
    titles = tuple(
        quoted.strip(" .,!?") for quoted in _QUOTED.findall(prose) if 2 <= len(quoted.split()) <= 6
    )
    prose = _QUOTED.sub(lambda m: " " * len(m.group(0)), prose)
    return identifiers, titles, tuple(_names(prose))


_line_entities = lru_cache(maxsize=8_192)(_read_line)


def entity_terms(entities: Iterable[str]) -> list[str]:
    """Entities as index terms (marked with ENTITY_PREFIX, so they never meet a word's term)."""
    return [ENTITY_PREFIX + e for e in entities]
