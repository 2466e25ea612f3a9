"""GPU proof helper: rebuild wheels of an installed distribution and its requirement closure from
the installed files, so ``create --with`` can install the GPU machine's own torch offline there:

    python3 scripts/gpu/wheels_from_installed.py torch OUTDIR

Each wheel holds the files its RECORD lists (as installed from PyPI: the same bytes) and a RECORD
with their hashes; scripts outside site-packages, bytecode and installer records are left out.
The requirement closure follows extras (torch's ``cuda-toolkit[cublas,...]``).
"""

import importlib.metadata as metadata
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement

SKIPPED = ("/RECORD", "/INSTALLER", "/REQUESTED", "/direct_url.json")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name(dist) -> str:
    """``name-version-py-abi-platform.whl`` from the dist's WHEEL tags (several tags compressed)."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    parts = [tag.split("-") for tag in tags or ["py3-none-any"]]
    tag = "-".join(".".join(dict.fromkeys(part[i] for part in parts)) for i in range(3))
    return f"{normal(dist.metadata['Name']).replace('-', '_')}-{dist.version}-{tag}.whl"


def write_wheel(dist, out: Path) -> str:
    site = Path(dist.locate_file(""))
    records = []
    name = wheel_name(dist)
    with zipfile.ZipFile(out / name, "w", zipfile.ZIP_STORED) as archive:
        for entry in dist.files or []:
            relative = str(entry)
            if relative.startswith("..") or "__pycache__" in relative or relative.endswith(SKIPPED):
                continue
            if not (site / relative).is_file():
                continue
            archive.write(site / relative, relative)
            digest = f"{entry.hash.mode}={entry.hash.value}" if entry.hash else ""
            records.append(f"{relative},{digest},{entry.size or ''}")
        record = next((str(e) for e in dist.files or [] if str(e).endswith(".dist-info/RECORD")), None)
        record = record or f"{dist.metadata['Name']}-{dist.version}.dist-info/RECORD"
        archive.writestr(record, "\n".join([*records, f"{record},,"]) + "\n")
    return name


def main(root: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    todo, seen, written = [(root, ())], set(), set()
    while todo:
        name, extras = todo.pop()
        name = normal(name)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print("missing", name)
            continue
        for text in dist.requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in ("", *extras)):
                todo.append((requirement.name, tuple(sorted(requirement.extras))))
        if name not in written:
            written.add(name)
            print("wheel", write_wheel(dist, out))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
