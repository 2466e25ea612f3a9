"""A pip lock's body check answers the same with its quick reading of plain pins as with the full
parse of every line: a ``name==1.2.3`` line, as uv writes nearly every pin, skips the requirement
parser (``tfgpu.lock.pip.lockfile._PLAIN_PIN``); every line it takes must be one the full parse
takes too, and every line it leaves goes to the full parse."""

from __future__ import annotations

import random
import re

import pytest

from tfgpu.lock.pip import lockfile

NEVER = re.compile(r"(?!)")

LINES = [
    "absl-py==2.3.1",
    "absl-py==2.3.1 \\",
    "nvidia-cudnn-cu12==9.3.0.75 \\",
    "tensorflow==2.21.0",
    "Jinja2==3.1.6",
    "zope.interface==7.2",
    "typing_extensions==4.15.0",
    "a==0",
    "a==01.02",
    "a==1.2.3.4.5",
    "a==1.2.3.4.5.6",
    "a==1234567890.1",
    "a==12345678901.1",
    "a==" + ".".join(["1234567890"] * 5),
    "a==" + ".".join(["1234567890"] * 7),
    "a==1.0.post1",
    "certifi==2026.10.19.post1 \\",
    "a==1.0rc1.post2.dev3",
    "a==1.0.dev3",
    "a==1.0a1",
    "a==1.0c1",
    "a==1.0-1",
    "a==1.0.post1234",
    "a==12345678.12345678.12345678.12345678.12345678rc999.post999.dev999",
    "a==123456789.12345678.12345678.12345678.12345678rc999.post999.dev999",
    "a==1.0rc1",
    "a==1.0+local",
    "a==v1.0",
    "a==1!2.0",
    "a==1.0.*",
    "a==1.",
    "a==.1",
    "a==1..2",
    "a===1.0",
    "a==1.0,<2",
    "a>=1.0",
    "a==1.0; python_version >= '3.9'",
    "a[extra]==1.0",
    "a @ https://example.org/a-1.0-py3-none-any.whl",
    "-e a==1.0",
    "--index-url https://example.org/simple",
    "a-==1.0",
    "-a==1.0",
    ".a==1.0",
    "a_==1.0",
    "a==1.0 ",
    " a==1.0",
    "a ==1.0",
    "a== 1.0",
    "a==1.0\t",
    "a==1.0\x1b[31m",
    "a\u202e==1.0",
    "a==\u0661.0",  # an Arabic-Indic digit: a digit to Python's \d, not to an ASCII pattern
    "ä==1.0",
    "a==1.0 \\ \\",
    "a" * 300 + "==1.0",
    "a" * 200 + "==1.0",  # the longest name taken (tfgpu.doors.requirements.NAME_LIMIT)
    "a" * 201 + "==1.0",  # one more: refused by both readings, never echoed whole
    "a" * 5000 + "==1.0",
    "",
]


def _full(line: str) -> str | None:
    """The answer of the full parse alone (the quick reading switched off)."""
    kept = lockfile._PLAIN_PIN
    lockfile._PLAIN_PIN = NEVER
    try:
        return lockfile._pin_problem(line)
    finally:
        lockfile._PLAIN_PIN = kept


@pytest.mark.parametrize("line", LINES)
def test_a_plain_pin_is_judged_as_the_full_parse_judges_it(line):
    quick = lockfile._PLAIN_PIN.fullmatch(line[:-2] if line.endswith(" \\") else line) is not None
    assert (lockfile._pin_problem(line) is None) == (_full(line) is None)
    if quick:
        assert _full(line) is None, line


def test_random_lines_get_the_same_answer_both_ways():
    """Lines near a plain pin (a name, ``==``, digits and dots, now and then a character that
    breaks one): whatever the quick reading takes, the full parse takes too, and the other way
    round. A seeded run: the same lines each time."""
    chosen = random.Random(20261206)
    quick = 0
    for _ in range(4000):
        name = "".join(chosen.choice("aZ09._-") for _ in range(chosen.randint(1, 6)))
        if chosen.random() < 0.6:  # a release: numbers and dots, now and then too many or too long
            version = ".".join(str(chosen.randint(0, 10 ** chosen.randint(1, 10))) for _ in range(chosen.randint(1, 7)))
            for suffix in ("a", "b", "rc", "c", ".post", "post", ".dev", "-", "+"):  # normal forms and others
                if chosen.random() < 0.15:
                    version += suffix + str(chosen.randint(0, 10 ** chosen.randint(1, 5)))
        else:
            version = "".join(chosen.choice("0123456789" * 3 + "..+!*-_ab ") for _ in range(chosen.randint(0, 14)))
        line = f"{name}{chosen.choice(['==', '==', '==', '===', '>=', '='])}{version}"
        if chosen.random() < 0.2:
            line += chosen.choice([" \\", " ; python_version > '3'", "\t", ","])
        quick += lockfile._PLAIN_PIN.fullmatch(line.removesuffix(" \\")) is not None
        assert (lockfile._pin_problem(line) is None) == (_full(line) is None), repr(line)
    assert quick > 100  # the quick reading was asked, not only the full parse


def test_a_body_with_a_line_that_is_no_pin_is_refused_whatever_its_neighbours(tmp_path):
    from tfgpu.errors import UsageError

    plain = "absl-py==2.3.1 \\\n    --hash=sha256:" + "0" * 64 + "\n"
    lockfile.check_body(plain, tmp_path / "lock.txt")
    for bad in ("--index-url https://example.org/simple\n", "a==1.0.*\n", "b @ https://example.org/b.whl\n"):
        with pytest.raises(UsageError) as refused:
            lockfile.check_body(plain + bad, tmp_path / "lock.txt")
        assert refused.value.code == "lock-has-options"


_WRITE_AND_READ = """
import json, sys
from pathlib import Path
from tfgpu.lock.pip import lockfile

body = "".join(f"{name}==1.2.3 \\\\\\n    --hash=sha256:{digit * 64}\\n" for name, digit in (("absl-py", "1"), ("grpcio", "2")))
lockfile.check_body(body, Path(sys.argv[1]))
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "packaging")))
"""


def test_a_body_of_plain_pins_is_checked_without_packaging(tmp_path):
    """Checking what uv wrote for a TensorFlow lock (plain ``name==1.2.3`` pins) loads no part of
    packaging: the requirement parser (with its markers, wheel tags, logging and typing) is loaded
    for a line that is not a plain pin only. A fresh interpreter, as a user's."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _WRITE_AND_READ, str(tmp_path / "lock.txt")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
