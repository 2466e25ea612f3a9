#!/usr/bin/env python3
"""Re-derive the NVIDIA download rows of ``tfgpu/data`` from manifests, or check them.

The rows are the CUDA runfiles (``cuda.toml`` ``[[toolkit]]``: ``runfile``, ``runfile_url``,
``sha256``, ``md5``) and the cuDNN archives (``cudnn_archives.toml`` ``[[archive]]``:
``filename``, ``url``, ``sha256``, ``md5``, ``size``, ``manifest``, ``cuda_min``/``cuda_max``).
A manifest fact is matched to a row by file name. The manifests (see nvidia_manifests.py):
NVIDIA's cuDNN and CUDA ``redistrib_<version>.json`` and ``md5sum.txt``, and the lists derived
from the downloads by spack, nixpkgs and conda-forge. Copies of the ones the data was made
from are kept in tests/fixtures/nvidia/ (their README says where each was read); sources.toml
names each copy in a ``fixture`` entry, which is how a row's ``source`` key is found.

Usage::

    python scripts/regen_nvidia_data.py MANIFEST...                 # what each manifest says, and
                                                                     # where the data differs
    python scripts/regen_nvidia_data.py --check MANIFEST...         # exit 1 if the data disagrees
    python scripts/regen_nvidia_data.py --check --complete tests/fixtures/nvidia/*
                                                                     # ... or has a checksum none confirms
    python scripts/regen_nvidia_data.py --update MANIFEST...        # fill the empty fields in place
    python scripts/regen_nvidia_data.py --update --add FILE MANIFEST...
                                                                     # also add an archive row for FILE

``--data DIR`` reads and writes another copy of the tables (default: tfgpu/data next to this
script); ``--cudnn-base URL`` is where a cuDNN manifest's ``relative_path`` values start.
``--update`` never overwrites a value that differs: a conflict is printed and exits 2, for a person
to look at. Exit codes: 0 in agreement (or updated), 1 ``--check`` found a difference, 2 bad input
or conflicting sources. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nvidia_manifests import CUDNN_REDIST, Fact, ManifestError, read

DATA = Path(__file__).resolve().parent.parent / "tfgpu" / "data"
TABLES = {"runfile": ("cuda.toml", "toolkit", "runfile"), "cudnn": ("cudnn_archives.toml", "archive", "filename")}
# Row field <- Fact attribute, per table.
FIELDS = {
    "runfile": {"sha256": "sha256", "md5": "md5", "runfile_url": "url"},
    "cudnn": {
        "sha256": "sha256",
        "md5": "md5",
        "size": "size",
        "url": "url",
        "manifest": "manifest",
        "cuda_min": "cuda_min",
        "cuda_max": "cuda_max",
    },
}
EMPTY = ("", 0)


class Tables:
    """The two TOML files as text (edited in place) and as parsed rows."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.text = {name: (directory / name).read_text(encoding="utf-8") for name, _, _ in TABLES.values()}
        self.sources = tomllib.loads((directory / "sources.toml").read_text(encoding="utf-8"))["sources"]
        self._parsed: dict[str, tuple[str, dict[str, dict]]] = {}

    def rows(self, table: str) -> dict[str, dict]:
        """The table's rows by file name, parsed once per text: asked once per manifest file,
        parsing the whole table each time cost seconds a run (read them, do not change them)."""
        name, array, key = TABLES[table]
        text = self.text[name]
        parsed = self._parsed.get(name)
        if parsed is None or parsed[0] != text:
            parsed = self._parsed[name] = (text, {row[key]: row for row in tomllib.loads(text)[array] if row.get(key)})
        return parsed[1]

    def source_for(self, origin: str) -> str:
        """The sources.toml key whose ``fixture`` is a file of this name ("" if none)."""
        for key, entry in self.sources.items():
            if Path(entry.get("fixture", "")).name == origin:
                return key
        return ""

    def write(self) -> None:
        for name, text in self.text.items():
            (self.directory / name).write_text(text, encoding="utf-8")


def table_of(filename: str) -> str:
    return "cudnn" if filename.startswith("cudnn") else "runfile"


def merge(facts: list[Fact]) -> tuple[dict[str, dict], list[str]]:
    """Per file name: each field's value and the manifests that give it; conflicts between
    manifests (a file with two different sha256 values, say) are returned as messages."""
    merged: dict[str, dict] = {}
    conflicts = []
    for fact in facts:
        fields = merged.setdefault(fact.filename, {})
        for field, attribute in FIELDS[table_of(fact.filename)].items():
            value = getattr(fact, attribute)
            if value in EMPTY:
                continue
            values = fields.setdefault(field, {})
            values.setdefault(value, []).append(fact.origin)
    for filename, fields in merged.items():
        for field, values in fields.items():
            # A file sits under one URL per site and may be listed by several of NVIDIA's
            # manifests; its checksums, size and CUDA range have one value.
            if len(values) > 1 and field not in ("url", "manifest"):
                conflicts.append(
                    f"{filename}: manifests disagree on {field}: "
                    + "; ".join(f"{v} ({', '.join(o)})" for v, o in values.items())
                )
    return merged, conflicts


def compare(tables: Tables, merged: dict[str, dict], facts: list[Fact]) -> list[tuple[str, str, str, object, object]]:
    """(filename, field, kind, data value, manifest value) for every difference; kind is
    ``missing`` (the data has no value), ``differs``, ``source`` (the row does not cite the
    manifest's sources.toml key) or ``absent`` (no row has that file)."""
    differences = []
    origins: dict[str, set[str]] = {}
    for fact in facts:
        origins.setdefault(fact.filename, set()).add(fact.origin)
    for filename, fields in sorted(merged.items()):
        rows = tables.rows(table_of(filename))
        row = rows.get(filename)
        if row is None:
            differences.append((filename, "", "absent", "", ", ".join(sorted(origins[filename]))))
            continue
        for field, values in fields.items():
            have = row.get(field, "")
            if have in EMPTY:
                differences.append((filename, field, "missing", have, next(iter(values))))
            elif field in ("url", "manifest"):
                # The row's URL is NVIDIA's: it must be one a manifest gives.
                if have not in values:
                    differences.append((filename, field, "differs", have, " | ".join(map(str, values))))
            elif have not in values:
                differences.append((filename, field, "differs", have, next(iter(values))))
        for origin in sorted(origins[filename]):
            key = tables.source_for(origin)
            if key and key not in row.get("source", []):
                differences.append((filename, "source", "source", row.get("source", []), key))
    return differences


def unconfirmed(tables: Tables, merged: dict[str, dict], facts: list[Fact]) -> list[str]:
    """Rows with a checksum that no given manifest confirms, and rows citing the sources.toml key of
    a given manifest that does not list their file."""
    listed: dict[str, set[str]] = {}
    for fact in facts:
        listed.setdefault(tables.source_for(fact.origin), set()).add(fact.filename)
    listed.pop("", None)
    problems = []
    for table in TABLES:
        for filename, row in tables.rows(table).items():
            for field in ("sha256", "md5"):
                if row.get(field) and row[field] not in merged.get(filename, {}).get(field, {}):
                    problems.append(f"{filename}: {field} {row[field]} is confirmed by none of the manifests given")
            for key in row.get("source", []):
                if key in listed and filename not in listed[key]:
                    problems.append(f"{filename}: cites {key}, whose manifest does not list the file")
    return problems


# --- editing the TOML text ---------------------------------------------------------------


def _render(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value) if isinstance(value, str) else str(value)


def _blocks(text: str, array: str) -> list[str]:
    return text.split(f"\n[[{array}]]\n")


# Where a field a row lacks goes: after the nearest of these that the row has.
ORDER = ("filename", "url", "runfile_url", "sha256", "md5", "size", "manifest")


def _set(block: str, field: str, value) -> str:
    line = f"{field} = {_render(value)}"
    if re.search(rf"^{field} = .*$", block, re.MULTILINE):
        return re.sub(rf"^{field} = .*$", lambda _: line, block, count=1, flags=re.MULTILINE)
    before = ORDER[: ORDER.index(field)] if field in ORDER else ()
    for anchor in reversed(before):
        if re.search(rf"^{anchor} = .*$", block, re.MULTILINE):
            return re.sub(rf"^({anchor} = .*)$", lambda m: f"{m.group(1)}\n{line}", block, count=1, flags=re.MULTILINE)
    return re.sub(r"^(source = .*)$", lambda m: f"{line}\n{m.group(1)}", block, count=1, flags=re.MULTILINE)


def update(tables: Tables, merged: dict[str, dict], facts: list[Fact], add: set[str]) -> list[str]:
    """Fill empty fields (and add the rows named in ``add``); returns what was done."""
    done = []
    origins: dict[str, list[str]] = {}
    for fact in facts:
        origins.setdefault(fact.filename, [])
        key = tables.source_for(fact.origin)
        if key and key not in origins[fact.filename]:
            origins[fact.filename].append(key)
    for table, (name, array, key_field) in TABLES.items():
        rows = tables.rows(table)
        blocks = _blocks(tables.text[name], array)
        for index, block in enumerate(blocks[1:], start=1):
            row = tomllib.loads(f"[[{array}]]\n" + block)[array][0]
            filename = row.get(key_field, "")
            if filename not in merged:
                continue
            changed = []
            for field, values in merged[filename].items():
                if row.get(field, "") in EMPTY:
                    block = _set(block, field, next(iter(values)))
                    changed.append(field)
            sources = list(row.get("source", []))
            for key in origins.get(filename, []):
                if key not in sources:
                    sources.append(key)
            if sources != row.get("source", []):
                block = _set(block, "source", sources)
                changed.append("source")
            confirmed = set(merged[filename])
            unverified = [f for f in row.get("unverified", []) if f not in confirmed]
            if unverified != row.get("unverified", []):
                block = _set(block, "unverified", unverified)
                changed.append("unverified")
            if changed:
                blocks[index] = block
                done.append(f"{name}: {filename}: set {', '.join(changed)}")
        for filename in sorted(add - set(rows)):
            if table_of(filename) != table or filename not in merged:
                continue
            if table != "cudnn":
                raise ManifestError(
                    f"--add {filename}: only cuDNN archive rows can be added "
                    "(a toolkit row needs driver facts no manifest has)"
                )
            blocks = _insert(blocks, _new_archive(filename, merged[filename], facts, origins[filename]))
            done.append(f"{name}: {filename}: added")
        tables.text[name] = f"\n[[{array}]]\n".join(blocks)
    return done


def _new_archive(filename: str, fields: dict, facts: list[Fact], sources: list[str]) -> str:
    fact = next(f for f in facts if f.filename == filename)
    version = next((f.version for f in facts if f.filename == filename and f.version), "")
    if not version or not fact.cuda_major or "url" not in fields or "sha256" not in fields:
        raise ManifestError(f"--add {filename}: the manifests give no version, CUDA major, URL or sha256 for it")
    value = {field: next(iter(values)) for field, values in fields.items()}
    row = {
        "version": version,
        "cuda_major": fact.cuda_major,
        "cuda_min": value.get("cuda_min", ""),
        "cuda_max": value.get("cuda_max", ""),
        "platform": "linux_x86_64",
        "filename": filename,
        "url": value["url"],
        "sha256": value["sha256"],
        "md5": value.get("md5", ""),
        "size": value.get("size", 0),
        "manifest": value.get("manifest", ""),
        "source": sources,
        "unverified": [f for f in ("cuda_min", "cuda_max", "md5", "size") if f not in value],
        "note": "",
    }
    return "\n".join(f"{field} = {_render(v)}" for field, v in row.items()) + "\n"


def _insert(blocks: list[str], new: str) -> list[str]:
    def order(block: str) -> tuple:
        row = tomllib.loads("[[archive]]\n" + block)["archive"][0]
        return tuple(int(p) for p in row["version"].split(".")), int(row["cuda_major"])

    rows = blocks[1:]
    last = rows[-1] if rows else ""
    trailer = last[len(last.rstrip("\n")) :]  # keep the file's final newline(s) at the end
    rows = [r.rstrip("\n") + "\n" for r in rows]
    key = order(new)
    position = next((i for i, r in enumerate(rows) if order(r) > key), len(rows))
    rows.insert(position, new)
    rows = [r if i == len(rows) - 1 else r.rstrip("\n") + "\n" for i, r in enumerate(rows)]
    rows[-1] = rows[-1].rstrip("\n") + (trailer or "\n")
    return [blocks[0], *rows]


# --- command line --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("manifests", nargs="+", type=Path)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when the data disagrees with a manifest")
    mode.add_argument("--update", action="store_true", help="fill empty fields of matching rows in place")
    parser.add_argument(
        "--complete",
        action="store_true",
        help="with --check: also fail on a checksum no manifest confirms, or a row citing "
        "a manifest's key that does not list its file",
    )
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="FILE",
        help="with --update: add an archive row for this file name",
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--cudnn-base", default=CUDNN_REDIST)
    args = parser.parse_args(argv)

    try:
        manifests = [read(path, args.cudnn_base) for path in args.manifests if path.name != "README.md"]
    except (OSError, ManifestError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    facts = [fact for manifest in manifests for fact in manifest.facts]
    tables = Tables(args.data)
    for manifest in manifests:
        key = tables.source_for(manifest.path.name) or "no sources.toml key"
        print(f"{manifest.path.name}: {manifest.kind}, {len(manifest.facts)} Linux x86_64 file(s) [{key}]")
        for warning in manifest.warnings:
            print(f"  warning: {warning}")
    merged, conflicts = merge(facts)
    if conflicts:
        print("\n".join(["sources disagree:", *conflicts]), file=sys.stderr)
        return 2

    if args.update:
        try:
            done = update(tables, merged, facts, set(args.add))
        except ManifestError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        conflicting = [d for d in compare(tables, merged, facts) if d[2] == "differs"]
        if conflicting:
            for filename, field, _, have, want in conflicting:
                print(f"conflict: {filename}: {field} is {have!r} in the data, {want!r} in a manifest", file=sys.stderr)
            return 2
        tables.write()
        print("\n".join(done) or "nothing to update")
        return 0

    differences = [d for d in compare(tables, merged, facts) if d[2] != "absent" or not args.check]
    for filename, field, kind, have, want in differences:
        if kind == "absent":
            print(f"not in the data: {filename} (from {want})")
        else:
            print(f"{kind}: {filename}: {field}: data {have!r}, manifest {want!r}")
    problems = unconfirmed(tables, merged, facts) if args.complete else []
    for problem in problems:
        print(f"unconfirmed: {problem}")
    matched = sum(1 for filename in merged if filename in tables.rows(table_of(filename)))
    print(f"{matched} data row(s) matched; {len([d for d in differences if d[2] != 'absent'])} difference(s)")
    if args.check and (any(d[2] != "absent" for d in differences) or problems or not matched):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
