"""One definition of the characters that must never reach a terminal or a file a human reviews
(tfgpu.doors.controls), and every place that cleans, escapes or refuses them takes it: a C1 control (CSI),
a bidirectional override or isolate, the BOM are treated as a line break always was."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess

import packagesource
import pytest

import tfgpu
from tfgpu.doors import controls, quoting
from tfgpu.errors import UsageError

HOSTILE = {"c1-csi": "\x9b", "nel": "\x85", "alm": "\u061c", "rlm": "\u200f", "rlo": "\u202e", "lri": "\u2066",
           "pdi": "\u2069", "line-separator": "\u2028", "bom": "\ufeff", "esc": "\x1b", "del": "\x7f"}  # fmt: skip
CASES = pytest.mark.parametrize("char", HOSTILE.values(), ids=list(HOSTILE))


def test_the_set_holds_every_class_and_nothing_printable():
    assert set(HOSTILE.values()) <= controls.CHARACTERS
    assert {"\n", "\t", "\r", "\x00"} <= controls.CHARACTERS
    assert not {" ", "a", "é", "\u00a0", "ß", "\u4e2d"} & controls.CHARACTERS


EVERY_CODE_POINT = "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize("keep", ["", "\n\t", "\t\n"])
def test_the_character_class_matches_exactly_the_set(keep):
    """Each ``keep`` asked for, in any order, after the class was built once for another order.
    The class is one bracket expression (asserted: no anchor, no lookaround, one character a
    match), so what it finds in one string of every code point is what it matches of each code
    point alone (a search of each of the 1.1 million cost a sixth of a CPU-second a case)."""
    text = controls.character_class(keep)
    assert re.fullmatch(r"\[[^\[\]]*\]", text), text
    pattern = re.compile(text)
    found = [m.group() for m in pattern.finditer(EVERY_CODE_POINT)]
    assert all(len(char) == 1 for char in found)
    assert set(found) == controls.CHARACTERS - set(keep)


# -- the export door (tfgpu/doors/quoting.py): each function's contract, with the whole set ---------------


@CASES
def test_comment_text_gets_a_space_for_it(char):
    for made in (quoting.one_line(f"a{char}b"), quoting.comment([f"a{char}b"]), quoting.tcl_comment([f"a{char}b"])):
        assert char not in made and "a b" in made


@CASES
@pytest.mark.parametrize("render", [quoting.single_line, quoting.docker_word, quoting.def_word])
def test_a_single_line_word_refuses_it(char, render):
    with pytest.raises(UsageError) as raised:
        render(f"a{char}b", "A value")
    assert raised.value.code == "bad-data"
    with pytest.raises(UsageError):
        quoting.docker_json(["echo", f"a{char}b"])


@CASES
def test_yaml_carries_it_escaped(char):
    for made in (quoting.yaml_scalar(f"a{char}b"), quoting.yaml_document({"k": f"a{char}b"})):
        assert made.isascii() and not set(made) & controls.CHARACTERS - {"\n"}, made


def _lua_read(literal: str) -> str:
    """The string a Lua 5.1 double-quoted literal holds (bytes from ``\\ddd``), as UTF-8."""
    body = literal[1:-1]
    out = bytearray()
    index = 0
    while index < len(body):
        if body[index] == "\\" and body[index + 1].isdigit():
            out.append(int(body[index + 1 : index + 4]))
            index += 4
        elif body[index] == "\\":
            out += body[index + 1].encode()
            index += 2
        else:
            out += body[index].encode()
            index += 1
    return out.decode("utf-8")


@CASES
def test_modulefile_strings_carry_it_escaped_and_read_back_exactly(char, tmp_path):
    value = f"a{char}b1"
    tcl, lua = quoting.tcl_string(value), quoting.lua_string(value)
    assert tcl.isascii() and lua.isascii() and not set(tcl + lua) & controls.CHARACTERS
    assert _lua_read(lua) == value
    tclsh = shutil.which("tclsh")
    if tclsh:
        script = tmp_path / "probe.tcl"
        script.write_text(f"fconfigure stdout -encoding utf-8\nputs -nonewline [set v {tcl}]\n", encoding="utf-8")
        done = subprocess.run([tclsh, str(script)], capture_output=True, timeout=30)
        assert done.returncode == 0 and done.stdout.decode("utf-8") == value, done.stderr


# -- every other place that meets such text takes the same set ---------------------------------


@CASES
def test_the_terminal_shows_it_escaped(char):
    from tfgpu.doors.controls import defused, shown

    assert char not in shown(f"a{char}b") and char not in defused(f"a{char}b")


@CASES
def test_a_line_another_program_printed_loses_it(char):
    from tfgpu.engines.pip_progress import label_of
    from tfgpu.process.pseudoterminal import Printed

    lines: list[str] = []
    Printed(lines, None).feed(f"Downloading a{char}b\n")
    assert len(lines) == 1 and lines[0].startswith("Downloading a") and char not in lines[0]
    encoded = "".join(f"%{byte:02X}" for byte in char.encode())
    assert char not in label_of(f"https://example.org/files/x{encoded}y.tar.gz")


@CASES
def test_a_prefix_a_url_a_bundle_member_and_a_data_table_line_refuse_it(char, tmp_path):
    from tfgpu.data.checks import _one_line
    from tfgpu.doors import urls
    from tfgpu.envs.location import check_path_text
    from tfgpu.lock.bundle.read import bundle_member

    with pytest.raises(UsageError) as raised:
        check_path_text(f"/tmp/a{char}b")
    assert raised.value.code == "bad-prefix"
    with pytest.raises(UsageError):
        urls.parse(f"https://example.org/a{char}b", "--channel")
    with pytest.raises(tfgpu.errors.TfgpuError):
        bundle_member(tmp_path, f"wheels/a{char}b.whl")
    assert not _one_line(f"a{char}b")


def test_the_requirement_door_and_the_activation_scripts_use_the_same_set():
    from tfgpu.doors import requirements
    from tfgpu.envs import activation

    assert requirements._CONTROL is controls.CHARACTERS
    # activation.py runs standalone inside a generated script (it cannot import tfgpu): its copy
    assert activation._CONTROLS == controls.character_class()
    assert activation._sh_double("a\u202eb") == activation._fish_double("a\u202eb") == "a b"


SPELLED = re.compile(r"\\x1f|\\x9f|\\x7f|\\u202e|\\u2066|\\ufeff|\\u2028|[\x1f\x7f\x9f\u202e\u2066\ufeff\u2028]")
"""A control range spelled out in a string (as a pattern's ``\\x00-\\x1f``, or the characters)."""


def test_no_module_spells_its_own_set():
    root = packagesource.PACKAGE
    offenders = []
    for path in packagesource.modules():
        relative = path.relative_to(root).as_posix()
        if relative in ("doors/controls.py", "envs/activation.py") or relative.startswith("envs/templates/"):
            continue
        for node in packagesource.walked(path):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SPELLED.search(node.value):
                offenders.append(f"{relative}:{node.lineno}")
    assert offenders == []
