"""What an export installs, pinned or not: the one place the pins of a lock become export text.

``script --from-lock LOCK`` hands every format a :class:`tfgpu.lock.exported.Locked` (read and
checked by ``tfgpu.lock.for_export``); without one the export resolves at install time and says
so. This module renders both cases for each format, so the formats only place its lines:

* the header's lines (:func:`header_lines`): which lock and its sha256, or "resolves at install time";
* the bash script's block (:func:`bash_block`): the lock's requirements written to a file and
  installed with ``pip install --require-hashes --no-deps``; a conda lock's packages downloaded
  by URL, each checked against its sha256 before an ``@EXPLICIT`` list of the checked files is
  handed to conda; and the functions ``pins_pip``/``pins_conda`` the mode bodies call, which say
  which of the two the run does;
* the image builds (:func:`image_pip`): the same requirements written to a file, the same pip flags.

Every value goes through ``tfgpu.doors.quoting``; the lock's lines were refused by the lock readers
unless they are pins, hashes and HTTPS URLs (``tfgpu.lock.exported.conda_pins``).
"""

from __future__ import annotations

from tfgpu.doors import quoting

HEREDOC_LOCK = "TFGPU_LOCK"
PIP_FLAGS = ("--require-hashes", "--no-deps")
"""pip checks every file against the lock's sha256 and installs nothing the lock does not list."""
IMAGE_LOCK = "/opt/tfgpu-lock.txt"
"""Where an image build puts the lock's requirements (Dockerfile, Apptainer)."""


def header_lines(pins) -> list[str]:
    """The lines every export's header carries about where its packages come from."""
    if pins is None:
        return [
            "Not pinned: the packages are resolved at install time (two installs a month apart can get",
            "different CUDA libraries). For exact pins with their sha256, export from a lock:",
            "  tfgpu-install lock ... -o LOCK; tfgpu-install script --from-lock LOCK --format ...",
        ]
    how = "pip --require-hashes" if pins.kind == "pip" else "conda by URL + sha256, pip --require-hashes"
    return [
        f"Pinned: exactly the lock {quoting.one_line(pins.name)} for {pins.platform}",
        f"  (sha256 of the file: {pins.file_sha256}),",
        f"  {pins.count()} packages, every file checked against the lock's sha256 ({how}).",
    ]


def _lock_words(pins) -> list[str]:
    q = quoting.sh
    return [
        "# --- the lock: exactly its pins, every file checked against its sha256 ---",
        f"LOCK_NAME={q(pins.name)}",
        f"LOCK_SHA256={q(pins.file_sha256)}",
    ]


def _heredoc(text: str) -> str:
    if any(line.strip() == HEREDOC_LOCK for line in text.splitlines()):
        raise AssertionError(f"the lock contains the heredoc delimiter {HEREDOC_LOCK}")
    return f"<<'{HEREDOC_LOCK}'\n{text.rstrip()}\n{HEREDOC_LOCK}"


UNPINNED_BASH = [
    "pins_pip() {",
    '    say "not pinned: pip resolves ${PIP_REQUIREMENTS[*]} at install time; for exact pins with their sha256,'
    ' export with tfgpu-install script --from-lock LOCK"',
    "}",
    "pins_conda() {",
    '    say "not pinned: conda resolves ${CONDA_SPECS[*]} at install time; for exact pins with their sha256,'
    ' export with tfgpu-install script --from-lock LOCK"',
    "}",
]


def bash_block(pins, mode: str) -> list[str]:
    """Shell lines placed after the script's variables (``TFGPU_PREFIX`` is known there)."""
    if pins is None:
        return UNPINNED_BASH if mode == "conda" else UNPINNED_BASH[:3]
    lines = _lock_words(pins)
    requirements = pins.requirements.strip()
    where = '"$TFGPU_PREFIX/etc/tfgpu/lock-$LOCK_SHA256.txt"'
    lines.append("# PIP_REQUIREMENTS above is what the lock was resolved from; what is installed is the lock's pins:")
    if requirements:
        lines.append(f"PIP_REQUIREMENTS=({' '.join(PIP_FLAGS)} -r {where})")
    else:
        lines.append("PIP_REQUIREMENTS=()")
    lines += [
        "pins_pip() {",
        f'    say "pinned: installing exactly the lock $LOCK_NAME (sha256 $LOCK_SHA256), {pins.count()} packages,'
        ' each file checked against its sha256"',
        '    mkdir -p "$TFGPU_PREFIX/etc/tfgpu"',
        f"    write_if_changed {where} 644 {_heredoc(requirements)}",
        '    LOCK_FAILURE_HINT="a file that does not match its hash is not what the lock $LOCK_NAME pinned'
        ' (a changed mirror or wheel directory): it was refused"',
        "}",
    ]
    if pins.kind == "conda":
        lines += _conda_block(pins)
    return lines


def _conda_block(pins) -> list[str]:
    q = quoting.sh
    entries = [f"    {q(f'{pin.url} {pin.sha256}')}" for pin in pins.conda]
    return [
        "# TFGPU_DOWNLOADS: where the lock's conda packages are downloaded and checked;",
        "# TFGPU_ALLOW_HTTP=1 allows a plain-http mirror (the sha256 is checked either way).",
        'LOCK_DOWNLOADS="${TFGPU_DOWNLOADS:-${XDG_CACHE_HOME:-$HOME/.cache}/tfgpu-install/downloads}"',
        'LOCK_EXPLICIT="$LOCK_DOWNLOADS/lock-$LOCK_SHA256.explicit.txt"',
        'CONDA_SPECS=(--file "$LOCK_EXPLICIT")',
        "CONDA_LOCKED=(",
        *entries,
        ")",
        "# pins_conda: each package downloaded (https only, unless TFGPU_ALLOW_HTTP=1) and checked against",
        "# the lock's sha256;",
        "# conda then installs the checked files from an @EXPLICIT list (no solve, no other source).",
        "# Another run sharing the downloads (a second install, a node on the same home) writes its own",
        "# temporary files: a file is checked before it takes its place, the list is whole when it does.",
        "pins_conda() {",
        "    local entry url sha file part list proto='=https'",
        "    if [ \"${TFGPU_ALLOW_HTTP:-0}\" = 1 ]; then proto='=https,http'; fi  # a trusted mirror; sha256 still checked",
        f'    say "pinned: the lock $LOCK_NAME (sha256 $LOCK_SHA256): {len(pins.conda)} conda packages by URL + sha256"',
        '    mkdir -p "$LOCK_DOWNLOADS"',
        '    list="$(mktemp "$LOCK_EXPLICIT.part.XXXXXX")"',
        '    printf \'%s\\n\' "@EXPLICIT" >"$list"',
        '    for entry in "${CONDA_LOCKED[@]}"; do',
        '        url="${entry% *}"',
        '        sha="${entry##* }"',
        '        file="$LOCK_DOWNLOADS/${url##*/}"',
        '        if [ ! -f "$file" ] || [ "$(sha256sum "$file" | cut -d " " -f 1)" != "$sha" ]; then',
        '            part="$(mktemp "$file.part.XXXXXX")"',
        '            run_logged curl --fail --silent --show-error --location --proto "$proto" --output "$part" "$url"',
        '            if [ "$(sha256sum "$part" | cut -d " " -f 1)" != "$sha" ]; then',
        '                rm -f "$part" "$list"',
        '                die "$url does not have the sha256 the lock $LOCK_NAME pinned ($sha): refused, nothing installed"',
        "            fi",
        '            chmod 644 "$part"',
        '            mv -f "$part" "$file"',
        "        fi",
        '        printf \'file://%s\\n\' "$file" >>"$list"',
        "    done",
        '    chmod 644 "$list"',
        '    mv -f "$list" "$LOCK_EXPLICIT"',
        "}",
    ]


def _piece(line: str, word) -> str:
    """One line of the requirements as a shell word; a trailing continuation backslash goes in
    double quotes (``"\\\\"``), which linters read as meant, unlike a backslash closing single quotes."""
    if line.endswith("\\"):
        return word(line[:-1], "A line of the lock") + '"\\\\"'
    return word(line, "A line of the lock")


def image_pip(pins, pip: str, word) -> list[str] | None:
    """Shell lines (to be joined with `` \\`` continuations) that write a pip lock's requirements and
    install them with ``pip`` in an image build, or None without a lock. ``word``: the format's
    quoting of one shell word (``quoting.docker_word``, ``quoting.def_word``). The file is written by
    ``printf`` one line a word (a Dockerfile heredoc is BuildKit-only and hadolint cannot read one);
    the lock's comment lines are left out, its pins and hashes are kept line for line."""
    if pins is None or not pins.requirements.strip():
        return None
    lines = [line for line in pins.requirements.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [
        "printf '%s\\n'",
        *(f"    {_piece(line, word)}" for line in lines),
        f"    >{IMAGE_LOCK}",
        f"&& {pip} install --no-cache-dir {' '.join(PIP_FLAGS)} -r {IMAGE_LOCK}",
    ]


LOCK_STAGE = "/lock"
"""Where the Dockerfile's download stage keeps a conda lock's checked packages."""


def conda_fetch(pins, word) -> list[str]:
    """One shell command, as lines to join with `` \\`` continuations, run in an empty directory
    of an image build: it downloads a conda lock's packages, checks each against the lock's sha256
    (``sha256sum --check --strict``: one mismatch fails the build) and writes ``explicit.txt``, an
    ``@EXPLICIT`` list of the checked files under :data:`LOCK_STAGE` (no solve, no other source).
    It runs in a python:slim stage: micromamba's image has no downloader."""
    sums = [f"{pin.sha256}  {pin.filename}" for pin in pins.conda]
    fetch = "import os, sys, urllib.request; [urllib.request.urlretrieve(u, os.path.basename(u)) for u in sys.argv[1:]]"
    return [
        "printf '%s\\n'",
        *(f"    {word(line, 'A line of the lock')}" for line in sums),
        "    >SHA256SUMS",
        f"&& python -c {word(fetch, 'The download program')}",
        *(f"    {word(pin.url, 'A package URL')}" for pin in pins.conda),
        "&& sha256sum --check --strict SHA256SUMS",
        f"&& {{ echo '@EXPLICIT'; sed 's#^[0-9a-f]*  #file://{LOCK_STAGE}/#' SHA256SUMS; }} >explicit.txt",
    ]


def joined(lines: list[str], indent: str = "    ") -> list[str]:
    """``lines`` as one shell command over several lines (`` \\`` at the end of all but the last)."""
    last = len(lines) - 1
    return [(indent if i else "") + line + (" \\" if i < last else "") for i, line in enumerate(lines)]


def conda_image_stage(pins, word) -> list[str]:
    """The Dockerfile's first stage for a conda lock (:func:`conda_fetch`); the image stage copies
    :data:`LOCK_STAGE` from it and installs ``explicit.txt``."""
    command = joined(conda_fetch(pins, word))
    return [
        "# Stage 1: the lock's conda packages, each checked against its sha256 before the image uses it.",
        "FROM python:3.12-slim AS lock",
        f"WORKDIR {LOCK_STAGE}",
        f"RUN {command[0]}",
        *command[1:],
        "",
        "# Stage 2: the image, from exactly those files.",
    ]
