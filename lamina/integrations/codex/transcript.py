"""Which transcript a hook event names (lamina.integrations.transcript, which also knows Gemini's
chats); kept here for the code that imported it from this module."""

from __future__ import annotations

from ..transcript import transcript_format

__all__ = ["transcript_format"]
