"""A short probe's child (``Runner.capture``: verify's framework orders, doctor's library probe, an
interpreter's version) runs the env's code, which may print hundreds of megabytes, leave a daemon
holding its pipes open, or close its pipes and run on. Its output is kept within a few MiB (its
first and last bytes, what lies between said to be left out), a child that exited is read as
exited (not as stopped at its timeout, its answers lost), and the timeout still holds a child
that closed its pipes.

Real children, real pipes; the stand-in frameworks are tests/test_verify_frameworks.py's.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from test_verify_frameworks import fake_env

from tfgpu.process import childpipes
from tfgpu.process.runner import Runner
from tfgpu.verify.frameworks import run_frameworks


def test_a_child_printing_hundreds_of_megabytes_keeps_its_first_and_last_lines():
    code = (
        "import sys\nprint('{\"first\": 1}')\nb = 'x' * (1 << 20) + '\\n'\n"
        "for _ in range(64): sys.stdout.write(b); sys.stderr.write(b)\nprint('{\"last\": 2}')\n"
    )
    done = Runner().capture([sys.executable, "-c", code], timeout=300)
    assert done.returncode == 0
    lines = done.output.splitlines()
    assert lines[0] == '{"first": 1}' and lines[-1] == '{"last": 2}'
    assert "bytes left out]" in done.output and len(done.output) <= 2 * childpipes.KEPT + 100
    assert len(done.stderr) <= 2 * childpipes.KEPT + 100


def test_a_daemon_holding_the_pipes_open_does_not_make_an_exit_a_timeout():
    code = (
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\n    os._exit(0)\n"
        "print('answer', flush=True)\n"
    )
    done = Runner().capture([sys.executable, "-c", code], timeout=100)
    # Before, the daemon's pipe made this the whole timeout: a 124, not the answer.
    assert done.returncode == 0 and done.output.strip() == "answer"


def test_a_child_that_closes_its_pipes_and_runs_on_is_stopped_at_its_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    code = f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\nos.close(1)\nos.close(2)\ntime.sleep(120)\n"
    # The child sleeps 120 s with its pipes closed: a reader that waited for it would return its 0,
    # not the 124 of the timeout; and the child is gone (stopped and reaped) once capture returns.
    done = Runner().capture([sys.executable, "-c", code], timeout=2)
    assert done.returncode == 124
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_verify_with_a_framework_whose_import_leaves_a_daemon_reports_what_it_computed(tmp_path):
    prefix = fake_env(tmp_path / "env")
    site = next(prefix.glob("lib/python3*/site-packages"))
    init = site / "torch" / "__init__.py"
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\n    os._exit(0)\n"
    init.write_text(daemon + init.read_text())
    report = run_frameworks(prefix, ("torch",), timeout=60)
    assert report["ok"], json.dumps(report)[:2000]
    assert all(entry["exit"] == "exit 0" for entry in report["orders"])


def test_input_a_daemon_holds_unread_does_not_hold_the_probe():
    code = (
        "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(120)\n    os._exit(0)\n"
        "print('answer', flush=True)\n"
    )
    done = Runner().capture([sys.executable, "-c", code], timeout=100, input="x" * (4 << 20))
    assert done.returncode == 0 and done.output.strip() == "answer"
