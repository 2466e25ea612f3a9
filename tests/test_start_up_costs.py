"""What a command's start-up leaves out, and that leaving it out changes no answer.

``plan --json`` is held to a few times a bare interpreter start (``scripts/bench_plan.py``): the
doors build their big sets and patterns only when first asked, the table cache decodes only the part
of a table a plan reads, and the console script keeps its start-up out of the cycle collector's
walks. Each test here holds one of those to the answer the slow way gives.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys

from tfgpu import data
from tfgpu.doors import controls
from tfgpu.resolver import tables


def _python(code: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    env.pop("TFGPU_DATA_DIR", None)
    env.pop("TFGPU_INSECURE_HOSTS", None)  # the suite names its loopback server; a plain run names none
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_ascii_check_agrees_with_the_set_for_every_character():
    """has_control judges ASCII text without the set: for every code point, alone and inside ASCII
    text, it answers what the set answers."""
    characters = controls.CHARACTERS
    for code in range(0x110000):
        char = chr(code)
        assert controls.has_control(char) == (char in characters), hex(code)
    for char in ("\x00", "\t", "\n", "\x1f", "\x7f", "\x9f", "\u202e", "\ufeff", "\U000e0041", "a", "é"):
        assert controls.has_control(f"plain {char} text") == (char in characters)
    assert not controls.has_control("")


def test_shown_and_defused_return_text_without_controls_as_it_is():
    for text in ("tensorflow==2.21.0", "/tmp/a b/é", "", "naïve\u00a0name"):
        assert controls.shown(text) == text and controls.defused(text) == text
    assert controls.shown("a\nb\u202e") == "a\\nb\\u202e" and controls.defused("a\nb\x1b") == "a\nb\\x1b"


def test_importing_the_doors_builds_no_set_and_compiles_no_pattern(tmp_path):
    done = _python(
        "import json, re\n"
        "from tfgpu.doors import controls, quoting, requirements, secrets\n"
        "patterns = [name for module in (controls, quoting, requirements, secrets)\n"
        "            for name, value in vars(module).items() if isinstance(value, re.Pattern)]\n"
        "built = 'CHARACTERS' in vars(controls)\n"
        "requirements._CONTROL\n"  # read: built now, and the door's set is controls' own
        "print(json.dumps([patterns, built, requirements._CONTROL is controls.CHARACTERS]))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], False, True]


def test_the_console_script_runs_its_command_with_the_collector_on(tmp_path):
    """entry() pauses the collector for the start-up only: the command (a long create, a repair)
    runs with it on, over what the command makes; main() called in-process leaves it as it is."""
    done = _python(
        "import gc, json, sys\n"
        "import tfgpu.cli.commands.plan as plan\n"
        "seen = []\n"
        "real = plan.cmd_plan\n"
        "def watched(settings):\n"
        "    seen.append([gc.isenabled(), gc.get_freeze_count() > 0])\n"
        "    return real(settings)\n"
        "plan.cmd_plan = watched\n"
        "from tfgpu.cli import entry, main\n"
        "gc.unfreeze()\n"
        "main(['plan', '--tf', '2.21', '--json', '--no-detect'])\n"
        "sys.stderr.write(json.dumps(seen) + '\\n')\n"
        "sys.argv[1:] = ['plan', '--tf', '2.21', '--json', '--no-detect']\n"
        "import atexit\n"
        "atexit.register(lambda: sys.stderr.write(json.dumps(seen) + '\\n'))  # entry() ends the process\n"
        "entry()\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    in_process, whole = (json.loads(line) for line in done.stderr.strip().splitlines()[-2:])
    assert in_process == [[True, False]]
    assert whole == [[True, False], [True, True]]


def test_the_console_script_ends_as_the_interpreter_would_without_its_teardown(tmp_path):
    """entry() ends the process after the exit handlers and a flush of the streams, without the
    interpreter's teardown: every exit handler runs once and in its order (one registered before
    the tool was imported too: a sitecustomize's, coverage's), a large piped output arrives whole,
    the exit code is the command's (3: a release that does not exist), and a thread still running
    is joined by the interpreter's own exit (its last line is printed)."""
    script = (
        "import atexit, sys, threading, time\n"
        "atexit.register(lambda: sys.stderr.write('early handler\\n'))\n"
        "from tfgpu.cli import entry\n"
        "atexit.register(lambda: sys.stderr.write('late handler\\n'))\n"
        "if sys.argv[1] == 'thread':\n"
        "    threading.Thread(target=lambda: (time.sleep(0.3), sys.stderr.write('thread done\\n'))).start()\n"
        "sys.argv[1:] = sys.argv[2:]\n"
        "entry()\n"
    )
    matrix = _python(script, tmp_path, "-", "matrix", "--json")
    assert matrix.returncode == 0, matrix.stderr
    assert len(matrix.stdout) > 10_000 and json.loads(matrix.stdout)  # whole, through a pipe
    assert matrix.stderr.count("late handler") == 1 and matrix.stderr.count("early handler") == 1
    assert matrix.stderr.index("late handler") < matrix.stderr.index("early handler")  # their order
    impossible = _python(script, tmp_path, "-", "plan", "--tf", "1.99", "--no-detect")
    assert impossible.returncode == 3, impossible.stderr
    assert impossible.stderr.count("early handler") == 1
    waited = _python(script, tmp_path, "thread", "plan", "--tf", "2.21", "--json", "--no-detect")
    assert waited.returncode == 0, waited.stderr
    assert "thread done" in waited.stderr and waited.stderr.count("early handler") == 1


def test_a_part_kept_apart_reads_as_the_whole_tables_key(tmp_path, monkeypatch):
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
    try:
        for _run in ("parsed", "cached"):  # the first run writes the cache the second reads
            data.clear()
            (name, keys), *_ = data._APART.items()
            for key in keys:
                part = data.load_part(name, key)
                assert part is not None and part == data.load(name)[key]
                assert data.load_part(name, key) == part  # also once the whole table is decoded
            assert data.load_part(name, "no-such-key", "default") == "default"
        assert isinstance(data._tables()[f"{name}:{keys[0]}"], bytes)  # read from the cache
    finally:
        data.clear()


def test_a_release_s_wheels_read_as_the_dict_of_its_rows(tmp_path, monkeypatch):
    """Each release's wheels, made as they are read, are the Wheels its rows make: by key, in the
    rows' order, equal to (and shown as) the dict of them, every shipped release."""
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TFGPU_DATA_DIR", raising=False)
    data.clear()
    try:
        rows = {row["version"]: row for row in data.load("tensorflow.toml")["release"]}
        for release in tables.releases():
            row = rows.get(str(release.version))
            if row is None:  # a version written differently in the table (2.0 for 2.0.0): found by value
                row = next(r for r in rows.values() if tables.parse(r["version"]) == release.version)
            whole = {key: tables.wheel_from_row(wheel) for key, wheel in row.get("wheels", {}).items()}
            assert release.wheels == whole and whole == release.wheels
            assert list(release.wheels) == list(whole) and len(release.wheels) == len(whole)
            assert repr(release.wheels) == repr(whole)
            assert all(release.wheels[key] is release.wheels[key] for key in whole)  # made once
            assert release.wheels.get("no-such-platform") is None and "no-such-platform" not in release.wheels
    finally:
        data.clear()


def test_a_plan_makes_the_wheels_of_the_releases_it_reads_only(tmp_path):
    done = _python(
        "import contextlib, io, json\n"
        "from tfgpu.cli import main\n"
        "from tfgpu.resolver import tables\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['plan', '--tf', '2.21', '--json', '--no-detect', '--driver', '580.65', '--gpu-cc', '9.0'])\n"
        "made = {str(r.version): sorted(r.wheels._made) for r in tables.releases() if r.wheels._made}\n"
        "print(json.dumps([made, sum(len(r.wheels) for r in tables.releases())]))\n",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    made, every = json.loads(done.stdout)
    assert list(made) == ["2.21.0"] and made["2.21.0"] == ["linux_x86_64"]
    assert every > 200  # what building each release's wheels up front made


def _actions(parser) -> list:
    """What a parser takes, as argparse holds it (the ``type`` checkers are made afresh per parser,
    so they are compared by name)."""
    return [
        (
            action.option_strings,
            action.dest,
            action.nargs,
            action.const,
            action.default,
            getattr(action.type, "__qualname__", action.type),
            action.choices,
            action.required,
            action.help,
            action.metavar,
            type(action).__name__,
        )
        for action in parser._actions
    ] + [
        ([action.dest for action in group._group_actions], group.required)
        for group in parser._mutually_exclusive_groups
    ]


def test_each_command_s_parser_made_alone_is_the_whole_grammar_s():
    """A run builds its command's parser alone (``command_parser``); ``--help``, completion and the
    docs read the whole grammar (``build_parser``). Each command's two parsers take the same options
    and print the same help, at any width."""
    from tfgpu.cli.parser import COMMANDS, build_parser, command_parser

    whole = build_parser().commands.choices
    assert list(whole) == list(COMMANDS)
    for name in COMMANDS:
        alone = command_parser(name)
        assert (alone.prog, alone.description, alone.epilog) == (
            whole[name].prog,
            whole[name].description,
            whole[name].epilog,
        )
        assert _actions(alone) == _actions(whole[name]), name
        for columns in ("60", "100", "200"):
            os.environ["COLUMNS"] = columns
            try:
                assert alone.format_help() == whole[name].format_help(), (name, columns)
            finally:
                del os.environ["COLUMNS"]


_RUNS = [
    "plan --tf 2.21 --json --os linux --driver 580.65 --gpu-cc 9.0",
    "plan --tf=2.13 --mode conda --with torch --with jax[cuda12] --no-project",
    "create --tf 2.21 --mode pip --name tf -y --dry-run",
    "lock --tf 2.21 --platform linux-64 --platform osx-arm64 -o lock.txt --check",
    "lock --check",
    "script --tf 2.21 --format slurm -o out --force",
    "doctor --interpreter /usr/bin/python3 --json",
    "verify -p ./env --bench --workers 2",
    "matrix --all --json",
    "cache prune --dry-run",
    "run -n tf -- python -c pass",
    "activate --name tf --shell fish",
    "completion zsh",
    "repair --prefix ./venv --undo --forget-journal",
    "--tf 2.13 --mode conda",
]
_REFUSED = [
    "plan --jsonn",
    "plan --platform linux-64 --json",
    "plan --tf 2.21 --tf-source pipy",
    "plan stray words",
    "plan --name tf --prefix ./env",
    "doctor --python /usr/bin/python3",
    "repair --python=3.11",
    "cache prnue",
    "completion tcsh",
    "remove",
    "run --name tf --prefix p",
    "verify --workers many",
    "plan --tf",
    "plan --js",
    "plan --json -- --tf",
]


def test_a_run_parses_as_the_whole_grammar_does():
    """Every command line, parsed by its command's parser alone, gives the namespace the whole grammar
    gives; every refused one the same error, "did you mean" and the option's other commands included."""
    import shlex

    from tfgpu.cli.parser import parse, with_default_command
    from tfgpu.errors import UsageError

    for line in _RUNS:
        argv = with_default_command(shlex.split(line))
        assert vars(parse(argv)) == _argparse_values(argv), line
        assert list(vars(parse(argv))) == list(_argparse_values(argv)), line
    for line in _REFUSED:
        argv = with_default_command(shlex.split(line))
        answers = []
        for run in (parse, _whole_grammar().parse_args):
            try:
                run(argv)
            except UsageError as error:
                answers.append(error.to_dict())
        assert len(answers) == 2 and answers[0] == answers[1], line


def test_installing_a_pip_bundle_loads_no_conda_lock(tmp_path):
    """``create --from-bundle`` loads the bundle reader, which reads pip and conda bundles alike;
    conda-lock (some 0.6 CPU-s to import, more than the rest of a pip bundle's install) is loaded
    for a conda bundle only. A bundle directory without its bundle.json stops the run right after
    the reader is loaded (exit 3, bundle-incomplete): what it loaded by then is what every pip
    bundle's install loads."""
    done = _python(
        "import contextlib, io, json, sys\n"
        "from tfgpu.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    code = main(['create', '--from-bundle', sys.argv[1], '--prefix', sys.argv[2], '--json'])\n"
        "print(json.dumps([code, json.loads(out.getvalue())['error']['code'], sorted(sys.modules)]))\n",
        tmp_path,
        str(tmp_path / "bundle"),
        str(tmp_path / "env"),
    )
    assert done.returncode == 0, done.stderr
    code, error, loaded = json.loads(done.stdout)
    assert (code, error) == (3, "bundle-incomplete")
    assert "tfgpu.lock.bundle.read" in loaded and "tfgpu.lock.pip.install" in loaded
    assert [name for name in loaded if name.split(".")[0] == "conda_lock" or name.startswith("tfgpu.lock.conda")] == []


def test_a_plan_given_its_target_imports_no_driver_reader_and_no_suggestions(tmp_path):
    """``--driver`` and ``--gpu-cc`` given: the driver's readers are not imported (nothing reads the
    driver), nor the "did you mean" module (nothing was mistyped)."""
    for _run in ("first", "cached"):  # the first run parses the tables and writes the cache
        done = _python(
            "import contextlib, io, json, sys\n"
            "from tfgpu.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    code = main(['plan', '--tf', '2.21', '--json', '--os', 'linux', '--driver', '580.65', '--gpu-cc', '9.0'])\n"
            "print(json.dumps([code, sorted(sys.modules)]))\n",
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
    code, loaded = json.loads(done.stdout)
    assert code == 0 and "tfgpu.detect" in loaded
    assert [
        name for name in ("tfgpu.detect.driver", "tfgpu.detect.nvidia_smi", "tfgpu.cli.typos") if name in loaded
    ] == []
    assert [name for name in ("pathlib", "urllib.parse", "ipaddress") if name in loaded] == []


@functools.cache
def _whole_grammar():
    """``build_parser()``, built once for this module (some 5 ms a build; the walk below parses
    hundreds of lines). argparse keeps nothing of one parse for the next: each ``parse_args`` starts
    from a new namespace, and the one thing ``Parser`` keeps (``argv``, for its error) is set anew
    by each parse, so a line parsed by this parser reads as it would by a new one."""
    from tfgpu.cli.parser import build_parser

    return build_parser()


def _argparse_values(argv: list[str]) -> dict:
    return vars(_whole_grammar().parse_args(argv))


def test_the_quick_reading_gives_argparse_s_namespace_or_leaves_the_line_to_it():
    """``tfgpu.cli.grammar.quick`` reads a run's options without argparse: what it reads is argparse's
    namespace, key for key and in argparse's order; what it does not read (every refused line, and
    forms such as ``--``, ``-h`` or a value that starts with ``-``) it leaves to argparse."""
    import shlex

    from tfgpu.cli.grammar import quick, with_default_command

    read = 0
    for line in _RUNS:
        argv = with_default_command(shlex.split(line))
        values = quick(argv)
        if values is not None:
            read += 1
            assert list(values.items()) == list(_argparse_values(argv).items()), line
    assert read >= 10  # the common forms are read quickly
    for line in [*_REFUSED, "plan -h", "plan --help", "plan --tf -1", "plan --json=yes", "lock --check x.txt"]:
        assert quick(with_default_command(shlex.split(line))) is None, line


def test_every_option_of_every_command_is_read_as_argparse_reads_it():
    """Each option each command takes, alone, twice, and in both spellings (``--flag value``,
    ``--flag=value``) with a value of its kind: the quick reading is argparse's, or it declines."""
    from tfgpu.cli.grammar import COMMANDS, _options, quick
    from tfgpu.errors import UsageError

    def sample(keywords: dict) -> str:
        if "choices" in keywords:
            return str(list(keywords["choices"])[-1])
        return "3" if keywords.get("type") is int else "2.21"

    checked = 0
    for command in COMMANDS:
        options = _options(command)
        if options is None:  # a positional word: argparse reads it
            assert quick([command]) is None
            continue
        parser = _whole_grammar().commands.choices[command]
        for action in parser._actions:
            if not action.option_strings or action.dest == "help":
                continue
            keywords = next(k for dest, k, _group in options[0] if dest == action.dest)
            flag = action.option_strings[-1]
            lines = (
                [[flag], [flag, flag]]
                if action.nargs == 0
                else [[flag, sample(keywords)], [f"{flag}={sample(keywords)}"], [flag, "a", flag, "b"], [flag]]
            )
            for words in lines:
                argv = [command, *words]
                values = quick(argv)
                try:
                    expected = _argparse_values(argv)
                except UsageError:
                    assert values is None, argv
                    continue
                if values is not None:
                    checked += 1
                    assert list(values.items()) == list(expected.items()), argv
    assert checked > 100


def test_a_credential_variable_is_told_as_its_pattern_tells_it():
    """The secrets door looks for a credential variable's value in what is printed; an ASCII name
    without a credential word is not run through the pattern. For every name here (this process's
    environment, the engines' own, any case, names whose characters ``re`` folds to ASCII ones, and
    every ASCII name of up to three of the pattern's letters and ``_`` around a credential word) the
    answer is the pattern's."""
    import itertools
    import re

    from tfgpu.doors import secrets

    names = [
        *os.environ,
        "CONDA_TOKEN",
        "conda_token",
        "Anaconda_Api_Token",
        "UV_INDEX_MIRROR_USERNAME",
        "uv_index_x_password",
        "UV_INDEX__PASSWORD",
        "GITHUB_TOKEN",
        "MY_SECRET",
        "DB_PASSWD",
        "X_API_KEY",
        "X_APIKEY",
        "X_AUTH",
        "AUTH",
        "TOKEN",
        "_TOKEN",
        "TOKEN_X",
        "HOME",
        "PATH",
        "X_\u017fECRET",  # ſ folds to s
        "X_TO\u212aEN",  # the Kelvin sign folds to k
        "X_AP\u0131KEY",  # dotless i
        "X_\u0130UTH",
        "",
    ]
    letters = "AKNOTSUE_x"
    for word in ("TOKEN", "SECRET", "AUTH", "PASSWORD"):
        for size in range(3):
            for head in itertools.product(letters, repeat=size):
                names += ["".join(head) + word, "".join(head) + "_" + word.lower(), word + "".join(head)]
    for name in names:
        assert secrets._is_credential_variable(name) == bool(re.fullmatch(secrets._VARIABLE, name, re.IGNORECASE)), name


def test_the_url_scan_finds_what_the_whole_text_search_finds():
    """Redaction tries the URL pattern only within a scheme's length before a ``:/`` or ``:\\``; over
    texts built to be hard (schemes of 31 to 34 characters, colons without slashes, URLs back to
    back, quotes and Unicode spaces between them, credentials in every form) every rewrite is the
    one ``re.sub`` over the whole text makes."""
    import random
    import re

    from tfgpu.doors import secrets

    pieces = [
        "https://u:p@host/x",
        "http:/u:pw@h",
        "http:\\\\u:p@h\\p",
        "a" * 31 + "://h/t/TOKEN/c",
        "b" * 32 + "://h/?token=x",
        "c" * 33 + ":/h",
        "x:y:/z",
        "::/",
        ":/",
        ":\\",
        "s3+x.y-z://k@b/?sig=1&a=2",
        "ftp://h",
        "1http://h",
        "-://h",
        "http://",
        "tok",
        '"',
        "'",
        "<",
        ">",
        "`",
        " ",
        "\n",
        "\u00a0",
        "\u2003",
        "é",
        "k:",
        "/",
        "\\",
        "@",
        "?token=abc",
        "--hash=sha256:0a1b2c3d4e5f60718293a4b5c6d7e8f9",  # a lock's hashes: letters a scheme may start with
        "+",
        ".",
        "-",
    ]
    chooser = random.Random(20261206)
    texts = [open(__file__, encoding="utf-8").read(), *pieces]
    texts += ["".join(chooser.choice(pieces) for _ in range(chooser.randrange(1, 30))) for _ in range(3000)]
    for text in texts:
        whole = re.sub(secrets._URL, lambda match: secrets.masked(match.group(0)), text)
        assert secrets._each_url(text, lambda match: secrets.masked(match.group(0))) == whole, repr(text)
        assert secrets._each_url(text, lambda match: f"[{match.group(0)}]") == re.sub(
            secrets._URL, lambda match: f"[{match.group(0)}]", text
        ), repr(text)
        # The two doors built on the same scan: a written file's check and a kept record's strip.
        everywhere = [match.group(0) for match in re.finditer(secrets._URL, text)]
        # (what it finds outside those URLs, after them: tests/hostile/test_hostile_secrets_found_in.py)
        with_credential = [secrets.masked(url) for url in everywhere if secrets.forms(url)]
        assert secrets.found_in(text, {})[: len(with_credential)] == with_credential
        assert secrets.stripped(text) == re.sub(secrets._URL, lambda match: secrets.strip(match.group(0)), text)
