"""The one error the data readers raise (``update-data`` turns it into a TfgpuError)."""

from __future__ import annotations


class SourceError(Exception):
    """A source did not answer, or did not look the way the reader expects; the message says what."""
