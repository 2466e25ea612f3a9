"""The secrets door (``tfgpu.doors.secrets``): the credential forms it knows, the URL without them, text
redacted for display, and the places every record, output, message and log passes through it,
held by tests that fail when a writer goes around it. The end-to-end proof with a real
token-guarded channel is tests/test_secrets_conda.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import tfgpu
from tfgpu import cli
from tfgpu.doors import secrets
from tfgpu.errors import UsageError

ROOT = Path(tfgpu.__file__).parent
TOKEN = "SECRETTOKEN123"


@pytest.mark.parametrize(
    ("url", "forms", "stripped", "masked"),
    [
        (
            f"https://h.example/t/{TOKEN}/chan",
            ["conda-token"],
            "https://h.example/chan",
            "https://h.example/t/***/chan",
        ),
        (f"http://127.0.0.1:8/t/{TOKEN}", ["conda-token"], "http://127.0.0.1:8", "http://127.0.0.1:8/t/***"),
        ("https://u:pw@h.example/simple", ["userinfo"], "https://h.example/simple", "https://***@h.example/simple"),
        (f"https://{TOKEN}@h.example/x", ["userinfo"], "https://h.example/x", "https://***@h.example/x"),
        (
            f"https://h.example/s?token={TOKEN}&a=1",
            ["query"],
            "https://h.example/s?a=1",
            "https://h.example/s?token=***&a=1",
        ),
        (
            f"https://h.example/s?Access_Token={TOKEN}",
            ["query"],
            "https://h.example/s",
            "https://h.example/s?Access_Token=***",
        ),
        (
            f"https://h.example/s?a=1;%74oken={TOKEN}",
            ["query"],
            "https://h.example/s?a=1",
            "https://h.example/s?a=1;%74oken=***",
        ),
        ("https://conda.anaconda.org/conda-forge", [], None, None),
        ("https://h.example/t/", [], None, None),  # a trailing "t" is a directory, not a token
        ("https://h.example/chan/?page=2", [], None, None),
    ],
)
def test_each_credential_form_is_known_stripped_and_masked(url, forms, stripped, masked):
    assert secrets.forms(url) == forms
    assert secrets.strip(url) == (stripped or url)
    assert secrets.masked(url) == (masked or url)
    assert TOKEN not in secrets.strip(url) and TOKEN not in secrets.masked(url)


def test_redact_masks_urls_in_text_and_the_values_of_credential_variables():
    environ = {"CONDA_TOKEN": "conda-secret-1", "UV_INDEX_MIRROR_PASSWORD": "uv-secret-2", "HOME": "/home/someone"}
    text = (
        f"GET http://127.0.0.1:9/t/{TOKEN}/chan/linux-64/repodata.json: 403\n"
        "uv said conda-secret-1 and uv-secret-2 (https://me:pw@h.example/simple)\n/home/someone stays"
    )
    shown = secrets.redact(text, environ)
    assert TOKEN not in shown and "conda-secret" not in shown and "uv-secret" not in shown and ":pw@" not in shown
    assert "http://127.0.0.1:9/t/***/chan/linux-64/repodata.json" in shown and "/home/someone stays" in shown
    found = secrets.found_in(text, environ)
    assert "the value of CONDA_TOKEN" in found and "the value of UV_INDEX_MIRROR_PASSWORD" in found
    assert secrets.stripped(json.dumps({"channels": [f"https://h.example/t/{TOKEN}/c"]})) == (
        '{"channels": ["https://h.example/c"]}'
    )


def test_with_credential_puts_the_given_channel_back_in_front():
    given = [f"http://127.0.0.1:9/t/{TOKEN}/chan", "https://conda.anaconda.org/conda-forge"]
    assert secrets.with_credential("http://127.0.0.1:9/chan/linux-64/a.conda", given) == (
        f"http://127.0.0.1:9/t/{TOKEN}/chan/linux-64/a.conda"
    )
    other = "https://conda.anaconda.org/conda-forge/noarch/b.conda"
    assert secrets.with_credential(other, given) == other
    assert secrets.with_credential("http://127.0.0.1:9/chanx/linux-64/a.conda", given).count(TOKEN) == 0


def test_every_output_file_holding_a_credential_is_refused_and_not_written(tmp_path, monkeypatch):
    from tfgpu.doors.paths import write_output

    for text in (f"curl https://h.example/t/{TOKEN}/c/x", "pip -i https://u:pw@h.example/simple", "a ?token=x"):
        target = tmp_path / "out.sh"
        if "?token=x" in text and "://" not in text:
            continue  # a query outside a URL is no URL
        with pytest.raises(UsageError) as refused:
            write_output(target, text)
        assert refused.value.code == "secret-in-output" and TOKEN not in refused.value.message
        assert not target.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setenv("CONDA_TOKEN", "conda-secret-1")
    with pytest.raises(UsageError):
        write_output(tmp_path / "x", b"export CONDA_TOKEN=conda-secret-1\n")
    assert write_output(tmp_path / "ok", "https://h.example/chan\n").read_text() == "https://h.example/chan\n"


@pytest.mark.parametrize("ending", ['"', "'", "\\", "<", "`", '\\"'])
def test_a_file_holding_a_password_the_url_pattern_stops_in_is_refused(tmp_path, ending):
    """A password holding a character that ends a URL in text: what redact masks, the file door
    refuses, and the password is in neither the message nor the directory."""
    from tfgpu.doors.paths import write_output

    text = f"index = https://me:pa{ending}ss9@mirror.example/simple\n"
    assert "ss9" not in secrets.redact(text)
    assert secrets.found_in(text) == ["https://***@"]
    with pytest.raises(UsageError) as refused:
        write_output(tmp_path / "out.toml", text)
    assert "ss9" not in refused.value.message and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text",
    ["see https://pypi.org and write to me@example.com", "https://pypi.org, me@example.com", "https://h/simple me@x"],
)
def test_prose_with_an_address_after_a_url_is_written(tmp_path, text):
    from tfgpu.doors.paths import write_output

    assert secrets.found_in(text) == []
    assert write_output(tmp_path / "notes.txt", text).read_text() == text


def test_the_runs_log_is_redacted(tmp_path):
    from tfgpu.process.runner import Runner

    runner = Runner(tmp_path / "run.log")
    runner.log(f"$ rattler solve -c http://127.0.0.1:9/t/{TOKEN}/chan")
    assert TOKEN not in (tmp_path / "run.log").read_text()


def _run(capsys, *argv: str) -> tuple[int, str]:
    """The exit code and what was printed: stdout (with --json, the one document) then stderr."""
    code = cli.main(list(argv))
    out = capsys.readouterr()
    return code, out.out + "\n" + out.err


def _document(said: str) -> dict:
    return json.loads(said.split("\n}\n", 1)[0] + "\n}")


TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64", "--tf", "2.21", "--mode", "conda")


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_plan_shows_a_tokens_channel_masked(capsys, json_flag):
    code, said = _run(capsys, "plan", *TARGET, "--channel", f"https://h.example/t/{TOKEN}/chan", *json_flag)
    assert code == 0 and TOKEN not in said and "https://h.example/t/***/chan" in said


SCRIPT, LOCK = ("script", "--format", "bash"), ("lock", "--platform", "linux-64")


@pytest.mark.parametrize(
    ("command", "channel", "code"),
    [
        *((command, f"https://me:{TOKEN}@h.example/chan", "bad-url") for command in (SCRIPT, LOCK)),
        *((command, f"https://h.example/chan?token={TOKEN}", "bad-channel") for command in (SCRIPT, LOCK)),
        # a lock records a /t/<token>/ channel without it (tests/test_secrets_conda.py); an export refuses it
        (SCRIPT, f"https://h.example/t/{TOKEN}/chan", "bad-channel"),
    ],
)
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_credential_in_a_channel_is_refused_and_shown_nowhere(capsys, tmp_path, command, channel, code, json_flag):
    out = tmp_path / "x.out"
    done, said = _run(capsys, *command, *TARGET, "--channel", channel, "-o", str(out), *json_flag)
    assert done == 2 and TOKEN not in said and not out.exists()
    if json_flag:
        assert _document(said)["error"]["code"] == code


def test_a_lock_refuses_an_index_with_a_credential_before_resolving(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TFGPU_INDEX_URL", f"https://h.example/t/{TOKEN}/simple")
    out = tmp_path / "lock.txt"
    argv = ("lock", "--no-detect", "--tf", "2.21", "--mode", "pip", "--platform", "linux-64", "-o", str(out))
    code, said = _run(capsys, *argv, "--json")
    assert code == 2 and _document(said)["error"]["code"] == "secret-in-url"
    assert TOKEN not in said and not out.exists()


# -- the door held: each place a record, an output, a message or a log is made calls it -----------

DOOR_CALLS = {
    ("doors/paths.py", "write_outputs"): "refuse_in",  # every -o file: locks, exports, bundles (write_output too)
    ("process/runner.py", "log"): "redact",  # the run's log
    ("cli/render/console.py", "_defused_item"): "redact",  # everything rich prints
    ("cli/output.py", "show"): "redacted_json",  # --json documents
    ("cli/output.py", "_text"): "redact",
    ("cli/__init__.py", "_report"): "redacted_json",  # a --json error
    ("envs/marker.py", "write"): "stripped",  # an env's record
    ("engines/rattler_engine.py", "write_records"): "stripped",  # an env's record of its conda packages
    ("doors/urls.py", "shown"): "redact",  # a URL in any message
    ("lock/conda/write.py", "write"): "strip",  # a lock's channels
    ("lock/conda/write.py", "lock_platform"): "strip",  # a lock's package URLs and inputs
    ("lock/conda/read.py", "check_urls"): "forms",  # a lock holding one is refused by every reader
    ("lock/bundle/conda_bundle.py", "build"): "strip",  # bundle.json's channels
}


def _calls(relative: str, function: str) -> set[str]:
    tree = ast.parse((ROOT / relative).read_text(encoding="utf-8"))
    node = next(
        n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
    )
    return {
        c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
        for c in ast.walk(node)
        if isinstance(c, ast.Call)
    }


@pytest.mark.parametrize(
    ("place", "door"), DOOR_CALLS.items(), ids=lambda v: "/".join(v) if isinstance(v, tuple) else v
)
def test_each_writer_printer_and_logger_calls_the_door(place, door):
    assert door in _calls(*place), f"{place[0]}:{place[1]} goes around tfgpu.doors.secrets.{door}"


# A file the user gets (-o) is written by tfgpu.doors.paths.write_output alone in the lock and export
# packages; these write other bytes: verified package copies and uv's own temporary input.
OTHER_WRITES = {
    ("lock/bundle/files.py", "write_bytes"),  # a built wheel copied, sha256-checked
    ("lock/bundle/files.py", "write"),  # a wheel member copied into the tool's wheel
    ("lock/resolving.py", "write_text"),  # requirements.in for uv, in a temporary directory
    ("lock/bundle/conda_bundle.py", "write"),  # tfgpu.lock.conda.write.write, the lock writer itself
}
WRITING_CALLS = {"write_text", "write_bytes", "write", "dump", "safe_dump"}


def test_write_output_is_write_outputs():
    """The one-file form hands its file to the many-files form, where the door stands."""
    assert "write_outputs" in _calls("doors/paths.py", "write_output")


def test_lock_bundle_and_export_files_are_written_only_through_the_door():
    offenders = []
    for path in sorted([*(ROOT / "lock").rglob("*.py"), *(ROOT / "export").glob("*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if (
                name in ("dump", "safe_dump")
                and len(node.args) < 2
                and not any(k.arg == "stream" for k in node.keywords)
            ):
                continue  # yaml.safe_dump(document) returns text; only a stream argument writes
            if name in WRITING_CALLS and (relative, name) not in OTHER_WRITES:
                offenders.append(f"{relative}:{node.lineno} .{name}()")
    assert offenders == []


def test_rattlers_engine_authenticates_every_request():
    """The child's gateway and installer take a client with rattler's AuthenticationMiddleware: a
    lock recorded without its token gets it back from the engine's own auth (RATTLER_AUTH_FILE)."""
    assert "_client" in _calls("engines/rattler_child.py", "_gateway")
    assert "_client" in _calls("engines/rattler_child.py", "_install")
    assert "AuthenticationMiddleware" in _calls("engines/rattler_child.py", "_client")
