"""How a value from data or from the user is written into a generated file: one function per format.

Every generated script, playbook, user-data file and Dockerfile, a lock's command to write it
again, a shell completion script and a command offered to the user to paste writes its values
through these (``tests/hostile/test_hostile_injection.py`` fails on a ``shlex.quote`` or
``shlex.join`` anywhere else), so a newline, a quote or a ``$(...)`` in a data table (a ``TFGPU_DATA_DIR`` overlay is a team's
mirror: data from elsewhere) or in a path stays data: shell words are ``shlex``-quoted, comments
are one line, YAML goes through a serializer, Dockerfile words are single-line and quoted, and
identifiers (image tags, versions, env names) must match their grammar or the export stops with
``bad-data`` (exit 2).
"""

from __future__ import annotations

import json
import re
import shlex
import textwrap

from tfgpu.doors.controls import character_class
from tfgpu.errors import UsageError


def _controls() -> str:
    """The character class of what never reaches a generated file as itself (tfgpu.doors.controls):
    line breaks, C0 and C1 controls, the bidirectional controls that reorder what a reviewer sees,
    the BOM. Built when first asked for, as the other doors' sets are: every command that shows a
    result imports this module (``sh`` for the commands it offers), and most write no file."""
    return character_class()


def one_line(text) -> str:
    """``text`` with every line break and control character (bidirectional controls included)
    turned into one space."""
    return re.sub(_controls() + "+", " ", str(text)).strip()


COMMENT_WIDTH = 100
"""Where comment lines are wrapped: a generated file is reviewed in a diff, not scrolled sideways."""


def comment(lines, mark: str = "#") -> str:
    """Comment lines (``# ...``); a value can never end a comment and start code. A long line is
    wrapped at :data:`COMMENT_WIDTH` (its continuation indented); a word longer than that (a URL)
    is not broken."""
    out = []
    for line in lines:
        text = one_line(line)
        wrapped = textwrap.wrap(
            text,
            width=COMMENT_WIDTH,
            initial_indent=f"{mark} ",
            subsequent_indent=f"{mark}     ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        out.extend(wrapped or [mark])
    return "\n".join(out)


def tcl_comment(lines) -> str:
    """Tcl comment lines: as :func:`comment`, and no line ends in a backslash (in Tcl a
    backslash-newline continues a comment onto the next line, which would swallow that line)."""
    return "\n".join(line.rstrip("\\").rstrip() for line in comment(lines).splitlines())


def sh(value) -> str:
    """One POSIX shell word (bash, sh, zsh). A value holding ``$`` or a backquote is written in
    double quotes with those escaped: single quotes would be as exact, but shellcheck (and hadolint,
    which runs it on RUN lines) reads ``'$(…)'`` as an expansion someone forgot (SC2016), and the
    generated scripts must pass it with no finding at all."""
    text = str(value)
    if "$" in text or "`" in text:
        return f'"{sh_double(text)}"'
    return shlex.quote(text)


def sh_join(argv) -> str:
    """A command line of POSIX shell words (:func:`sh` each): a command written into a lock, a
    bundle's script or advice for the user to paste runs as exactly these arguments."""
    return " ".join(sh(word) for word in argv)


def sh_double(value) -> str:
    """Text for inside a double-quoted POSIX shell string (``"$VAR/<here>"``)."""
    return re.sub(r'([\\"$`])', r"\\\1", str(value))


def fish_double(value) -> str:
    """Text for inside a double-quoted fish string (fish expands ``$`` and ``\\`` there)."""
    return re.sub(r'([\\"$])', r"\\\1", str(value))


def fish_word(value) -> str:
    """One fish word: single-quoted, where fish expands nothing (only ``\\`` and ``\'`` are escapes)."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def yaml_scalar(value) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's, escapes included)."""
    return json.dumps(str(value))


def yaml_document(value) -> str:
    """A YAML document from plain data, through PyYAML's serializer (multi-line text as a literal
    block where YAML allows one, else a quoted scalar)."""
    # Start-up cost: `plan` loads this module but not yaml.
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data):  # a value used twice is written twice: no &anchors/*aliases
            return True

    def text(dumper, data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)

    Dumper.add_representer(str, text)
    Dumper.add_multi_representer(str, text)  # str subclasses too (tfgpu.doors.requirements.Requirement)
    return yaml.dump(
        value, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=1 << 20, allow_unicode=False
    )


def single_line(value, what: str) -> str:
    """``value`` when it has no line break or control character (Dockerfile instructions are
    lines: a newline inside a quoted word would start a new instruction; a bidirectional control
    makes the line read otherwise than it runs); else ``bad-data``."""
    text = str(value)
    if re.search(_controls(), text):
        raise UsageError(
            "bad-data",
            f"{what} {text!r} contains a line break or control character, which cannot go "
            "into a generated file safely; nothing was written.",
            ["Fix the data file it comes from (a TFGPU_DATA_DIR overlay?)."],
        )
    return text


def docker_word(value, what: str = "a value") -> str:
    """One shell word on a Dockerfile ``RUN`` line."""
    return sh(single_line(value, what))


def docker_json(argv, what: str = "a command") -> str:
    """The exec form of ``CMD``/``RUN``/``HEALTHCHECK`` (a JSON array on one line)."""
    return json.dumps([single_line(arg, what) for arg in argv])


def token(value, pattern: str, what: str) -> str:
    """``value`` when it matches ``pattern`` whole (an image tag, a version, an env name); else ``bad-data``."""
    text = str(value)
    if not re.fullmatch(pattern, text):
        raise UsageError(
            "bad-data",
            f"{what} {text!r} is not of the expected form ({pattern}); nothing was written.",
            ["Fix the data file it comes from (a TFGPU_DATA_DIR overlay?)."],
        )
    return text


IMAGE_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
VERSION = r"[0-9][0-9A-Za-z.+!_-]{0,63}"
NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def tcl_string(value) -> str:
    """A Tcl double-quoted word (Environment Modules' and Lmod's Tcl modulefiles): ``\\ " $ [ ] { }``
    escaped so nothing is substituted, control characters (tfgpu.doors.controls) as ``\\uXXXX`` (exactly
    four digits, so a following hex digit is never read into the escape), or past the BMP (the tag
    characters) as Tcl 8.6's ``\\UXXXXXXXX`` (eight: its longest, so the same holds)."""

    def escape(match: re.Match) -> str:
        char = match.group(0)
        if char in '\\"$[]{}':
            return "\\" + char
        return f"\\u{ord(char):04x}" if ord(char) < 0x10000 else f"\\U{ord(char):08x}"

    return '"' + re.sub(r'[\\"$\[\]{}]|' + _controls(), escape, str(value)) + '"'


def lua_string(value) -> str:
    """A Lua double-quoted string (Lmod's modulefiles): ``\\`` and ``"`` escaped, control characters
    (tfgpu.doors.controls) as their UTF-8 bytes, each ``\\ddd`` (always three digits: Lua 5.1's strings
    are bytes and it has no ``\\u{...}``); never a long bracket, which ``]]`` in the value would end."""

    def escape(match: re.Match) -> str:
        char = match.group(0)
        # A lone surrogate stands for the byte of a path that is not UTF-8 (os.fsdecode): that byte.
        raw = char.encode("utf-8", "surrogateescape" if "\udc80" <= char <= "\udcff" else "surrogatepass")
        return "\\" + char if char in '\\"' else "".join(f"\\{byte:03d}" for byte in raw)

    return '"' + re.sub(r'[\\"]|' + _controls(), escape, str(value)) + '"'


def def_file(text: str) -> str:
    """A whole Apptainer definition file, once every value is in it: Apptainer (1.1 and later)
    replaces ``{{ NAME }}`` anywhere in the file, comments and quoted words included, by a
    ``--build-arg`` (and fails the build on one not given), and has no escape for it; so a value
    that brings ``{{`` (a channel URL may hold braces) stops the export with ``bad-data``."""
    if "{{" in text:
        line = next(line for line in text.splitlines() if "{{" in line)
        raise UsageError(
            "bad-data",
            f"A value in the Apptainer definition holds '{{{{', which Apptainer reads as a build "
            f"argument: {one_line(line)[:200]!r}; nothing was written.",
            ["Give the value without '{{' (a URL can percent-encode it: %7B%7B)."],
        )
    return text


def def_word(value, what: str = "a value") -> str:
    """One shell word in a section of an Apptainer definition file. The file is split into sections
    at lines starting with ``%``, so a line break inside even a quoted word could open a section:
    the value must be one line (else ``bad-data``), then it is quoted as by :func:`sh`."""
    return sh(single_line(value, what))
