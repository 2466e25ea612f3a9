"""sonames.toml's ``[[dlopened]]`` rows, read one way for every consumer: doctor's ``libs.dlopen`` /
``libs.closed`` probe (``tfgpu.doctor.libraries.dlopen_callers``) and the links create and repair
write (``tfgpu.envs.activation.dlopen_links``, also embedded into exported scripts).

A row says "library ``caller`` dlopens ``name``, searched on ``runpath``, served by the env's
``provides``". The generator writes one row per wheel version it read, so the same caller and name
appear once per cuDNN release: those rows mean the same, and are one row here (the first, its
provenance kept). Two rows for one caller and name that *disagree* (another RUNPATH, another
provider) cannot both be right, and a consumer that picked one would differ from one that picked
the other or took both: such a table (shipped, or a ``TFGPU_DATA_DIR`` overlay, which replaces the
shipped table whole) is ``bad-data``, naming both rows, when it is parsed.
"""

from __future__ import annotations

from tfgpu.errors import UsageError

MEANING = ("provides", "runpath")
"""The fields a consumer acts on, besides the key (caller, name); the others are provenance."""
_WAY = "Fix that file (or remove it from the TFGPU_DATA_DIR overlay to use the shipped table)."


def _meaning(row: dict) -> tuple:
    return tuple(tuple(row.get(key) or ()) if key == "runpath" else row.get(key) for key in MEANING)


def rows(document: dict, where: str = "sonames.toml") -> tuple[dict, ...]:
    """The ``[[dlopened]]`` rows of a parsed sonames.toml, one per (caller, name), in the order of
    their first appearance; ``bad-data`` naming ``where`` when two rows for one caller and name disagree."""
    kept: dict[tuple[str, str], tuple[int, dict]] = {}
    for index, row in enumerate(document.get("dlopened", ()), start=1):
        key = (row["caller"], row["name"])
        if key not in kept:
            kept[key] = (index, row)
            continue
        first_index, first = kept[key]
        if _meaning(first) != _meaning(row):
            described = "; ".join(
                f"row {n}: provides {r.get('provides')!r}, runpath {list(r.get('runpath') or ())}"
                for n, r in ((first_index, first), (index, row))
            )
            raise UsageError(
                "bad-data",
                f"{where}: two [[dlopened]] rows say different things of {key[0]} dlopening {key[1]} "
                f"({described}); one caller and name has one meaning.",
                [_WAY],
            )
    return tuple(row for _, row in kept.values())
