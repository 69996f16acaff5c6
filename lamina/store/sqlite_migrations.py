"""Ordered, named schema migrations of the SQLite store. Append; never edit a released one.

tests/test_store_moves.py pins the schema a fresh database ends up with.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_POSTING_PACKS = """\
            bank_id INTEGER NOT NULL,
            term TEXT NOT NULL,
            upto_seq INTEGER NOT NULL,
            postings INTEGER NOT NULL,
            version INTEGER NOT NULL,
            seqs BLOB NOT NULL,
            tfs BLOB NOT NULL,
            lengths BLOB NOT NULL,
            PRIMARY KEY (bank_id, term)
"""
"""The columns of `posting_packs` (0006 made the table, 0007 made it again with rowids)."""

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
MIGRATIONS.append(
    (
        "0006_search_in_database",
        f"""
        -- Recall searches the database instead of loading a bank into every process (see
        -- lamina.store.sqlite_search). `terms` is the memory's BM25 length (NULL: not yet
        -- indexed, see SQLiteStore.prepare_search), `tokens` its text's token count, `t` when
        -- it happened (an ISO-8601 UTC string, so strings order as times do).
        ALTER TABLE memories ADD COLUMN terms INTEGER;
        ALTER TABLE memories ADD COLUMN tokens INTEGER;
        ALTER TABLE memories ADD COLUMN t TEXT
            GENERATED ALWAYS AS (coalesce(occurred_at, said_at)) VIRTUAL;
        CREATE INDEX memories_by_bank_time ON memories (bank_id, t);
        CREATE INDEX memories_by_bank_embedder ON memories (bank_id, embedder, seq);

        -- The postings of lamina.bank.lexical.tokenize (and entity terms), with the memory's
        -- length beside each, so BM25 is computed from this table alone.
        CREATE TABLE postings (
            bank_id INTEGER NOT NULL,
            term TEXT NOT NULL,
            seq INTEGER NOT NULL,
            tf INTEGER NOT NULL,
            terms INTEGER NOT NULL,
            PRIMARY KEY (bank_id, term, seq)
        ) WITHOUT ROWID;
        CREATE INDEX postings_by_seq ON postings (seq);

        -- The postings of a common term packed into one row (seqs as int64, tf and lengths
        -- as int32), as of `upto_seq`: a search reads the pack plus the term's postings
        -- after it; `version` is new with every build (a process may keep the packs it
        -- read). A posting removed from a pack's range leaves a tombstone in `pack_dead`,
        -- which searches subtract, until the pack is rebuilt (see
        -- lamina.store.sqlite_postings).
        CREATE TABLE posting_packs (
{_POSTING_PACKS}        ) WITHOUT ROWID;
        CREATE TABLE pack_dead (
            bank_id INTEGER NOT NULL,
            term TEXT NOT NULL,
            seq INTEGER NOT NULL,
            PRIMARY KEY (bank_id, term, seq)
        ) WITHOUT ROWID;
        CREATE TRIGGER postings_deleted AFTER DELETE ON postings BEGIN
            INSERT OR IGNORE INTO pack_dead (bank_id, term, seq)
                SELECT old.bank_id, old.term, old.seq FROM posting_packs k
                WHERE k.bank_id = old.bank_id AND k.term = old.term
                AND k.upto_seq >= old.seq;
        END;

        -- Counts kept by triggers, so sizes are read, never counted: live memories, their
        -- total BM25 length, memories with a vector, records; per embedder, memories.
        -- `search_ready`: every memory of the bank has its postings. `vector_epoch` grows
        -- when vectors change in place (cached vector files are then rebuilt).
        ALTER TABLE banks ADD COLUMN live_memories INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE banks ADD COLUMN total_terms INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE banks ADD COLUMN embedded INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE banks ADD COLUMN records INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE banks ADD COLUMN search_ready INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE banks ADD COLUMN vector_epoch INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE bank_embedders (
            bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            embedder TEXT NOT NULL,
            memories INTEGER NOT NULL,
            PRIMARY KEY (bank_id, embedder)
        ) WITHOUT ROWID;

        UPDATE banks SET
            live_memories = (SELECT count(*) FROM memories m WHERE m.bank_id = banks.id),
            embedded = (SELECT count(*) FROM memories m WHERE m.bank_id = banks.id
                        AND m.embedding IS NOT NULL),
            records = (SELECT count(*) FROM records r JOIN documents d ON d.id = r.document_id
                       WHERE d.bank_id = banks.id);
        UPDATE banks SET search_ready = 0 WHERE live_memories > 0;
        INSERT INTO bank_embedders (bank_id, embedder, memories)
            SELECT bank_id, embedder, count(*) FROM memories
            WHERE embedder IS NOT NULL AND embedding IS NOT NULL GROUP BY bank_id, embedder;

        CREATE TRIGGER memories_inserted AFTER INSERT ON memories BEGIN
            UPDATE banks SET live_memories = live_memories + 1,
                total_terms = total_terms + coalesce(new.terms, 0),
                embedded = embedded + (new.embedding IS NOT NULL)
                WHERE id = new.bank_id;
            INSERT INTO bank_embedders (bank_id, embedder, memories)
                SELECT new.bank_id, new.embedder, 1
                WHERE new.embedder IS NOT NULL AND new.embedding IS NOT NULL
                ON CONFLICT (bank_id, embedder) DO UPDATE SET memories = memories + 1;
        END;

        CREATE TRIGGER memories_deleted AFTER DELETE ON memories BEGIN
            UPDATE banks SET live_memories = live_memories - 1,
                total_terms = total_terms - coalesce(old.terms, 0),
                embedded = embedded - (old.embedding IS NOT NULL)
                WHERE id = old.bank_id;
            UPDATE bank_embedders SET memories = memories - 1
                WHERE bank_id = old.bank_id AND embedder = old.embedder
                AND old.embedding IS NOT NULL;
            DELETE FROM postings WHERE seq = old.seq;
        END;

        CREATE TRIGGER memories_changed AFTER UPDATE OF terms, embedding, embedder ON memories
        BEGIN
            UPDATE banks SET
                total_terms = total_terms - coalesce(old.terms, 0) + coalesce(new.terms, 0),
                embedded = embedded - (old.embedding IS NOT NULL) + (new.embedding IS NOT NULL)
                WHERE id = new.bank_id;
            UPDATE bank_embedders SET memories = memories - 1
                WHERE bank_id = old.bank_id AND embedder = old.embedder
                AND old.embedding IS NOT NULL;
            INSERT INTO bank_embedders (bank_id, embedder, memories)
                SELECT new.bank_id, new.embedder, 1
                WHERE new.embedder IS NOT NULL AND new.embedding IS NOT NULL
                ON CONFLICT (bank_id, embedder) DO UPDATE SET memories = memories + 1;
        END;

        CREATE TRIGGER records_inserted AFTER INSERT ON records BEGIN
            UPDATE banks SET records = records + 1
                WHERE id = (SELECT bank_id FROM documents WHERE id = new.document_id);
        END;

        CREATE TRIGGER records_deleted AFTER DELETE ON records BEGIN
            UPDATE banks SET records = records - 1
                WHERE id = (SELECT bank_id FROM documents WHERE id = old.document_id);
        END;
        """,
    )
)
MIGRATIONS.append(
    (
        "0007_posting_packs_by_rowid",
        # A WITHOUT ROWID table keeps whole rows in its key's b-tree, and a lookup there reads
        # every row it compares against whole, blobs and all: 14 ms to find the versions of 60
        # packs at 100k memories. In a rowid table the key's index holds the key alone, and a
        # row's blobs are read only when asked for (0.1 ms). And tombstones now cover a
        # packed term's postings after its pack as well.
        f"""
        DROP TRIGGER postings_deleted;
        ALTER TABLE posting_packs RENAME TO posting_packs_0006;
        CREATE TABLE posting_packs (
{_POSTING_PACKS}        );
        INSERT INTO posting_packs (bank_id, term, upto_seq, postings, version, seqs, tfs, lengths)
            SELECT bank_id, term, upto_seq, postings, version, seqs, tfs, lengths
            FROM posting_packs_0006;
        DROP TABLE posting_packs_0006;
        -- Every removed posting of a packed term, after its pack too: a server that keeps
        -- the rows after a pack subtracts these rather than reading them all again.
        CREATE TRIGGER postings_deleted AFTER DELETE ON postings BEGIN
            INSERT OR IGNORE INTO pack_dead (bank_id, term, seq)
                SELECT old.bank_id, old.term, old.seq FROM posting_packs k
                WHERE k.bank_id = old.bank_id AND k.term = old.term;
        END;
        """,
    )
)
MIGRATIONS.append(
    (
        "0008_memories_by_kind",
        """
        -- The inspector's count of memories per kind (and its kind filter) read this index
        -- alone: 5 ms instead of 70 ms at 100,000 memories.
        CREATE INDEX memories_by_bank_kind ON memories (bank_id, kind);
        """,
    )
)
MIGRATIONS.append(
    (
        "0009_corrections",
        """
        -- A user's marks on memories (lamina.bank.model.Correction): by memory id, not tied
        -- to the memory's row, so a retain that rewrites the memory keeps its mark.
        CREATE TABLE corrections (
            bank_id INTEGER NOT NULL REFERENCES banks(id) ON DELETE CASCADE,
            memory_id TEXT NOT NULL,
            state TEXT NOT NULL,
            replacement TEXT,
            note TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            PRIMARY KEY (bank_id, memory_id)
        ) WITHOUT ROWID;
        """,
    )
)
MIGRATIONS.append(
    (
        "0010_one_pack_codec",
        """
        -- Posting packs are written in the one codec both stores use (lamina.store.packs):
        -- the packs of the earlier layout (three plain arrays) are dropped, and each bank is
        -- marked to pack its common terms again, which its next recall or retain does
        -- (MemoryBank.prepare); searches read the postings row by row until then.
        DELETE FROM pack_dead;
        DELETE FROM posting_packs;
        UPDATE banks SET search_ready = 0;
        """,
    )
)
