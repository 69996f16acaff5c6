"""The public API is `lamina.__all__`: pinned here, so a name is added or dropped on purpose."""

from __future__ import annotations

import subprocess
import sys

import lamina

PUBLIC = [
    "AccessError",
    "Bank",
    "BankHandle",
    "BankStats",
    "Block",
    "ChannelTool",
    "CompileOptions",
    "CompileResult",
    "Compiler",
    "ConfigError",
    "ContextLog",
    "Document",
    "Embedder",
    "ExtractiveSummariser",
    "ImageBlock",
    "InputError",
    "Kind",
    "LaminaError",
    "Memory",
    "MemoryBank",
    "MemoryStore",
    "Message",
    "NotFoundError",
    "OverBudgetError",
    "Pin",
    "QueryOptions",
    "ReadError",
    "ReadWarning",
    "Reader",
    "RecallHit",
    "RecallOptions",
    "RecallQuery",
    "RecallResult",
    "RetainOptions",
    "RetainReport",
    "Role",
    "Source",
    "StoreError",
    "StoredLog",
    "Summariser",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Transcript",
    "Turn",
    "TurnRules",
    "UnknownBlock",
    "UnknownFormatError",
    "__version__",
    "compose_recall_query",
    "conversational_text",
    "count_message",
    "count_text",
    "detect_format",
    "format_memory_block",
    "inject_memory_block",
    "is_turn_start",
    "iter_turns",
    "last_turns",
    "open",
    "read_message_list",
    "read_messages",
    "read_transcript",
    "recall_query_for_file",
    "register_reader",
    "strip_tagged_blocks",
]


def test_all_is_the_pinned_list() -> None:
    assert lamina.__all__ == PUBLIC


def test_every_exported_name_is_importable_and_public() -> None:
    for name in lamina.__all__:
        assert hasattr(lamina, name), name
        value = getattr(lamina, name)
        if name == "__version__":
            continue
        assert not name.startswith("_"), name
        if not isinstance(value, type) and not callable(value):
            continue  # a type alias (Block)
        assert value.__module__.startswith("lamina."), (name, value.__module__)
        # Defined in a module that does not hide it (not a private module, not a private name).
        assert not any(part.startswith("_") for part in value.__module__.split(".")), name


def test_from_lamina_import_star_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from lamina import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(PUBLIC)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        lamina.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("lamina.NoSuchThing did not raise")


def test_errors_share_one_root() -> None:
    errors = [getattr(lamina, n) for n in PUBLIC if n.endswith("Error")]
    assert errors and all(issubclass(e, lamina.LaminaError) for e in errors)


def test_import_lamina_loads_none_of_the_api_until_asked() -> None:
    code = "import sys, lamina; print(sorted(m for m in sys.modules if m.startswith('lamina')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['lamina']"


def test_the_front_classes_document_their_use() -> None:
    for cls in (lamina.MemoryBank, lamina.Compiler, lamina.MemoryStore, lamina.BankHandle):
        assert cls.__doc__ and ">>>" not in cls.__doc__ and "(" in cls.__doc__, cls
        for name, member in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                member = member.fget
            elif isinstance(member, classmethod | staticmethod):
                member = member.__func__
            elif not callable(member):
                continue
            assert member.__doc__, f"{cls.__name__}.{name} has no docstring"
