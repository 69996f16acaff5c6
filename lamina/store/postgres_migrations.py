"""Ordered, named schema migrations of the PostgreSQL store. Append; never edit a released one.

The tables mirror the SQLite store's (lamina/store/sqlite_migrations.py) with native types:
timestamptz, jsonb, text[] and pgvector's `vector`. tests/test_store_moves.py pins the
schema a fresh database ends up with.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE EXTENSION IF NOT EXISTS vector;

        CREATE TABLE banks (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL UNIQUE,
            created_at timestamptz NOT NULL DEFAULT now(),
            metadata jsonb NOT NULL DEFAULT '{}',
            generation bigint NOT NULL DEFAULT 0,
            deletions bigint NOT NULL DEFAULT 0
        );

        CREATE TABLE documents (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            bank_id bigint NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            name text NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{}',
            tags text[] NOT NULL DEFAULT '{}',
            source text,
            format text,
            cursor_offset bigint NOT NULL DEFAULT 0,
            cursor_open_offset bigint NOT NULL DEFAULT 0,
            cursor_open_line bigint,
            cursor_records bigint NOT NULL DEFAULT 0,
            cursor_fingerprint text NOT NULL DEFAULT '',
            cursor_size bigint NOT NULL DEFAULT 0,
            cursor_version bigint NOT NULL DEFAULT 0,
            UNIQUE (bank_id, name)
        );

        CREATE TABLE records (
            document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            record_id text NOT NULL,
            PRIMARY KEY (document_id, record_id)
        );

        CREATE TABLE memories (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id text NOT NULL,
            bank_id bigint NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            document_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
            kind text NOT NULL,
            text text NOT NULL,
            record_ids text[] NOT NULL,
            occurred_at timestamptz,
            said_at timestamptz,
            speakers text[] NOT NULL DEFAULT '{}',
            entities text[] NOT NULL DEFAULT '{}',
            tags text[] NOT NULL DEFAULT '{}',
            content_hash text NOT NULL,
            embedding vector,
            embedder text,
            first_line bigint,
            last_line bigint,
            created_at timestamptz NOT NULL,
            UNIQUE (bank_id, id)
        );

        CREATE INDEX memories_by_document ON memories (document_id);
        CREATE INDEX memories_by_bank_seq ON memories (bank_id, seq);

        CREATE TABLE api_keys (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL UNIQUE,
            key_hash text NOT NULL UNIQUE,
            banks text[] NOT NULL,
            created_at timestamptz NOT NULL
        );

        CREATE TABLE operations (
            id text PRIMARY KEY,
            kind text NOT NULL,
            bank text NOT NULL,
            status text NOT NULL,
            result jsonb,
            error text,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL
        );
        """,
    ),
]
