"""The default embedder's tokenizer for short texts, without the `tokenizers` package.

A fresh process that embeds one query (the prompt hook, `lamina recall`) spent about 40 ms of
CPU importing `tokenizers` and building its tokenizer from the model's tokenizer.json. BERT's
tokenization is short enough to do here with the same vocabulary, read from the same file:
clean the text (control and format characters dropped, whitespace made spaces), put spaces
around CJK ideographs, drop accents (NFD, then no nonspacing marks), lowercase character by
character, split at spaces and around every punctuation mark, and cut each word into the longest
pieces the vocabulary holds, greedily from the left (a word longer than 100 characters, or with
a part no piece matches, is one unknown token). The ids are those of `tokenizers` with the
model's settings, [CLS] and [SEP] around at most `max_tokens` in all (a test compares them on
the shared transcripts, LoCoMo and edge cases).

`tokenizers` reads characters through its own, older Unicode tables. So text is handled here
only if every character in it has had the same category since Unicode 3.2 (Python's
`unicodedata.ucd_3_2_0`), where those tables and Python's agree; text with a newer character
(most emoji), or a special token such as "[SEP]", which `tokenizers` matches before
normalising, returns None, and the caller asks `tokenizers`.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Final

import orjson

__all__ = ["WordPiece"]

_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_WORD: Final = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")
"""After cleaning and lowercasing: runs of letters and digits, and each ASCII punctuation mark
on its own (Python's string.punctuation, which is Rust's is_ascii_punctuation)."""
_SPECIAL: Final = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_MAX_WORD: Final = 100
_CJK: Final = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip
"""The ideograph blocks BERT's normaliser puts spaces around (as `tokenizers` lists them)."""
_PUNCTUATION: Final = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")

_normal: dict[str, str | None] = {}
"""A character -> what normalising makes of it; None: not handled here."""


def _normalise_char(ch: str) -> str | None:
    category = unicodedata.category(ch)
    if ch in "\t\n\r":
        return " "
    if category in ("Cn", "Cs") or unicodedata.ucd_3_2_0.category(ch) != category:
        return None  # newer than the tables of `tokenizers`, changed since, or a lone surrogate
    if unicodedata.combining(ch) and category != "Mn":
        return None  # a spacing mark NFD might reorder: rare, left to `tokenizers`
    if category in ("Cc", "Cf", "Co") or ch in "\x00\ufffd":
        return ""
    if category in ("Zs", "Zl", "Zp"):
        return " "
    code = ord(ch)
    if any(low <= code <= high for low, high in _CJK):
        return f" {ch} "
    kept = "".join(c for c in unicodedata.normalize("NFD", ch) if unicodedata.category(c) != "Mn")
    return "".join(c.lower() for c in kept)


def _normalise(text: str) -> str | None:
    """BERT's normalisation of `text` (see the module doc), or None."""
    if text.isascii():
        return _CONTROL.sub("", text).lower()
    parts: list[str] = []
    for ch in text:
        try:
            mapped = _normal[ch]
        except KeyError:
            mapped = _normal[ch] = _normalise_char(ch)
        if mapped is None:
            return None
        parts.append(mapped)
    return "".join(parts)


def _words(normal: str) -> list[str]:
    """The pre-tokenizer: split at whitespace, each punctuation mark a word of its own."""
    if normal.isascii():
        return _WORD.findall(normal)
    words: list[str] = []
    for chunk in normal.split():
        if chunk.isascii():
            words.extend(_WORD.findall(chunk))
            continue
        start = 0
        for i, ch in enumerate(chunk):
            if ch in _PUNCTUATION or unicodedata.category(ch).startswith("P"):
                if start < i:
                    words.append(chunk[start:i])
                words.append(ch)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


class WordPiece:
    """Token ids for a BERT WordPiece tokenizer.json (lowercasing, no added tokens beyond the
    special ones); None for text it does not handle."""

    def __init__(self, path: Path, max_tokens: int) -> None:
        spec = orjson.loads(path.read_bytes())
        model = spec["model"]
        normalizer = spec.get("normalizer") or {}
        if (
            model.get("type") != "WordPiece"
            or model.get("continuing_subword_prefix") != "##"
            or model.get("max_input_chars_per_word") != _MAX_WORD
            or normalizer.get("type") != "BertNormalizer"
            or not (normalizer.get("clean_text") and normalizer.get("handle_chinese_chars"))
            or normalizer.get("lowercase") is not True
            or normalizer.get("strip_accents") not in (None, True)
            or (spec.get("pre_tokenizer") or {}).get("type") != "BertPreTokenizer"
            or (spec.get("post_processor") or {}).get("type") != "TemplateProcessing"
            or {t["content"] for t in spec.get("added_tokens", [])} - set(_SPECIAL)
        ):
            raise ValueError(f"{path}: not a tokenizer this module reproduces")
        self.vocab: dict[str, int] = model["vocab"]
        self.unk = self.vocab[model["unk_token"]]
        self.cls, self.sep = self.vocab["[CLS]"], self.vocab["[SEP]"]
        self.max_words = max_tokens - 2

    def encode(self, text: str) -> list[int] | None:
        """The ids of `text` with [CLS] and [SEP], or None when this module does not handle
        it (see the module doc)."""
        if "[" in text and any(s in text for s in _SPECIAL):
            return None
        normal = _normalise(text)
        if normal is None:
            return None
        vocab, unk, limit = self.vocab, self.unk, self.max_words
        ids: list[int] = [self.cls]
        for word in _words(normal):
            if len(ids) > limit:
                break
            found = vocab.get(word)
            if found is not None:
                ids.append(found)
                continue
            ids.extend(self._pieces(word) if len(word) <= _MAX_WORD else (unk,))
        del ids[limit + 1 :]
        ids.append(self.sep)
        return ids

    def _pieces(self, word: str) -> list[int] | tuple[int]:
        """Longest pieces first, from the left; one unknown token if a part matches none."""
        vocab = self.vocab
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                found = vocab.get(word[start:end] if start == 0 else "##" + word[start:end])
                if found is not None:
                    pieces.append(found)
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return pieces
