"""Access keys for HTTP and MCP, written once for both databases (see lamina.store.dialect):
a key is kept by name as a hash of its secret, with the banks it may read ("*" for all)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import StoreError
from .dialect import SQLBase

__all__ = ["SQLKeys"]


class SQLKeys(SQLBase):
    """The access-key part of `Store` (lamina.store.base.KeyStore)."""

    def create_api_key(self, name: str, key_hash: str, banks: Sequence[str]) -> None:
        d = self.dialect
        try:
            with self._write() as conn:
                self._run(
                    conn,
                    "INSERT INTO api_keys (name, key_hash, banks, created_at) VALUES (?, ?, ?, ?)",
                    (name, key_hash, d.array_in(list(banks)), d.now()),
                )
        except d.unique_violation:
            raise StoreError(f"an API key named {name!r} already exists") from None

    def find_api_key(self, key_hash: str) -> tuple[str, list[str]] | None:
        row = self._one("SELECT name, banks FROM api_keys WHERE key_hash = ?", (key_hash,))
        if row is None:
            return None
        name, banks = row
        return str(name), list(self.dialect.array_out(banks))

    def list_api_keys(self) -> list[tuple[str, list[str], str]]:
        d = self.dialect
        rows = self._all("SELECT name, banks, created_at FROM api_keys ORDER BY name")
        return [
            (str(name), list(d.array_out(banks)), d.time_out(created).isoformat())
            for name, banks, created in rows
        ]

    def api_key_hashes(self) -> dict[str, str]:
        return {str(n): str(h) for n, h in self._all("SELECT name, key_hash FROM api_keys")}

    def delete_api_key(self, name: str) -> bool:
        with self._write() as conn:
            return int(self._run(conn, "DELETE FROM api_keys WHERE name = ?", (name,)).rowcount) > 0

    def count_api_keys(self) -> int:
        return int(self._one("SELECT count(*) FROM api_keys")[0])
