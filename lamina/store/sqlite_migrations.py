"""Ordered, named schema migrations of the SQLite store. Append; never edit a released one.

tests/test_store_moves.py pins the schema a fresh database ends up with.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE banks (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            generation INTEGER NOT NULL DEFAULT 0,
            deletions INTEGER NOT NULL DEFAULT 0
        );

        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            tags TEXT NOT NULL DEFAULT '[]',
            source TEXT,
            format TEXT,
            cursor_offset INTEGER NOT NULL DEFAULT 0,
            cursor_open_offset INTEGER NOT NULL DEFAULT 0,
            cursor_open_line INTEGER,
            cursor_records INTEGER NOT NULL DEFAULT 0,
            cursor_fingerprint TEXT NOT NULL DEFAULT '',
            cursor_size INTEGER NOT NULL DEFAULT 0,
            cursor_version INTEGER NOT NULL DEFAULT 0,
            UNIQUE (bank_id, name)
        );

        CREATE TABLE records (
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            record_id TEXT NOT NULL,
            PRIMARY KEY (document_id, record_id)
        ) WITHOUT ROWID;

        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            record_ids TEXT NOT NULL,
            occurred_at TEXT,
            said_at TEXT,
            speakers TEXT NOT NULL DEFAULT '[]',
            entities TEXT NOT NULL DEFAULT '[]',
            tags TEXT NOT NULL DEFAULT '[]',
            content_hash TEXT NOT NULL,
            embedding BLOB,
            embedder TEXT,
            first_line INTEGER,
            last_line INTEGER,
            created_at TEXT NOT NULL,
            UNIQUE (bank_id, id)
        );

        CREATE INDEX memories_by_document ON memories(document_id);
        """,
    ),
    (
        "0002_api_keys_and_operations",
        """
        CREATE TABLE api_keys (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            key_hash TEXT NOT NULL UNIQUE,
            banks TEXT NOT NULL,
            created_at TEXT NOT NULL
        );

        CREATE TABLE operations (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            bank TEXT NOT NULL,
            status TEXT NOT NULL,
            result TEXT,
            error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        """,
    ),
    (
        "0003_context_logs",
        """
        CREATE TABLE context_logs (
            id INTEGER PRIMARY KEY,
            bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            messages INTEGER NOT NULL DEFAULT 0,
            frontier TEXT,
            UNIQUE (bank_id, name)
        );

        CREATE TABLE context_messages (
            log_id INTEGER NOT NULL REFERENCES context_logs(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            message_id TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (log_id, position),
            UNIQUE (log_id, message_id)
        ) WITHOUT ROWID;

        CREATE TABLE context_summaries (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            log_id INTEGER NOT NULL REFERENCES context_logs(id) ON DELETE CASCADE,
            id TEXT NOT NULL,
            level INTEGER NOT NULL,
            start_position INTEGER NOT NULL,
            end_position INTEGER NOT NULL,
            children TEXT NOT NULL,
            text TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            summariser TEXT NOT NULL,
            request_hash TEXT NOT NULL,
            stop_reason TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (log_id, id)
        );
        """,
    ),
    (
        "0004_pins_and_spend",
        """
        CREATE TABLE context_pins (
            log_id INTEGER NOT NULL REFERENCES context_logs(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            seq INTEGER NOT NULL,
            mode TEXT NOT NULL,
            level INTEGER NOT NULL,
            start_position INTEGER,
            end_position INTEGER,
            document TEXT,
            created_at TEXT NOT NULL,
            PRIMARY KEY (log_id, name)
        ) WITHOUT ROWID;

        CREATE TABLE llm_spend (
            id INTEGER PRIMARY KEY,
            summariser TEXT NOT NULL,
            at TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL
        );
        CREATE INDEX llm_spend_by_time ON llm_spend (summariser, at);
        """,
    ),
    (
        "0005_log_token_counts",
        """
        -- Token counts of context-log messages, so a log opens without counting again.
        CREATE TABLE context_counts (
            log_id INTEGER NOT NULL REFERENCES context_logs(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            position INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            shown INTEGER NOT NULL,
            uncut INTEGER NOT NULL,
            PRIMARY KEY (log_id, key, position)
        ) WITHOUT ROWID;
        """,
    ),
]
