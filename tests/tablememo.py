"""Each data table parsed once per test process, whatever overlay comes with it.

tests/conftest.py keeps the parse of a whole set of tables (the shipped ones with one
TFGPU_DATA_DIR overlay), so a test whose overlay is its own (a row naming the test's own
directory, a hostile row refused as bad-data) parses and validates every shipped table again:
about 0.2 s of CPU a command, for the twenty tables the overlay does not touch. ``parse_once``
stands in for ``tfgpu.data.parse`` (one table's bytes, decoded, parsed and checked against its
schema): the same bytes of the same table at the same place give a copy of the document the
first call made (unless a test has replaced the schema); a table that fails is not kept, so each bad one is refused afresh by the tool's
own parser. conftest.py sees the parser replaced and leaves the set to ``tfgpu.data._parse_all``,
which calls this once per table and writes its cache file as it always does.
"""

from __future__ import annotations

import marshal

from tfgpu import data
from tfgpu.data import schema

_PARSE, _VALIDATE = data.parse, schema.validate
_KEPT: dict[tuple[str, bytes, str], bytes] = {}


def parse_once(name: str, raw: bytes, where: str) -> dict:
    """``tfgpu.data.parse(name, raw, where)``, parsed once for the process (see the module docstring)."""
    key = (name, raw, where)
    if schema.validate is not _VALIDATE:  # a test's own schema: its answers are not the tool's
        return _PARSE(name, raw, where)
    if key not in _KEPT:
        document = _PARSE(name, raw, where)
        _KEPT[key] = marshal.dumps(document)
        return document
    return marshal.loads(_KEPT[key])  # a copy a command may change
