"""The shape of the package, held by tests: no import cycle (between subpackages, or between any
two modules), one door for child processes (``tfgpu/process/runner.py``), no module over 500 lines (as ruff formats it), no
backend reading lock files, one folder per lock format that uses no other format's. Imports inside functions count: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from packagesource import PACKAGE as ROOT
from packagesource import modules as package_files
from packagesource import nodes, parents, text, walked

# Code that runs inside the *target* env's Python (or is embedded into a generated script), not in
# the tool's process: it cannot import tfgpu, so it starts its own children.
IN_TARGET_ENV = {
    "verify/check_env.py",
    "verify/gpu_checks.py",
    "verify/probe_libs.py",
    "verify/multiworker.py",
    "verify/frameworks_env.py",
    "verify/framework_ops.py",
    "verify/libuse.py",
}
TEMPLATE_DIRS = ("envs/templates/", "export/templates/")


def modules() -> dict[str, Path]:
    found = {}
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(TEMPLATE_DIRS):
            continue
        name = "tfgpu." + relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The tfgpu modules ``path`` imports (``from tfgpu.x import y`` names tfgpu.x.y when that is a module)."""
    found = set()
    for node in walked(path):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("tfgpu")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tfgpu") and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in known else node.module)
    return {name for name in found if name in known}


def unit(module: str) -> str:
    """The subpackage (or top-level module) a module belongs to: tfgpu.installers.pip -> installers.
    Each door and each piece of process machinery is a unit of its own (tfgpu.doors.urls ->
    doors.urls): they are independent modules grouped for the reader, not one room."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in ("doors", "process"):
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "tfgpu"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) - {name} for name, path in found.items()}


def test_no_import_cycle_between_subpackages(graph):
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        units.setdefault(unit(module), set()).update(unit(t) for t in targets if unit(t) != unit(module))
    units.pop("tfgpu", None)  # tfgpu/__init__.py holds only the version
    for targets in units.values():
        targets.discard("tfgpu")
    assert cycles(units) == []


def test_no_import_cycle_between_modules(graph):
    assert cycles(graph) == []


def test_installers_never_read_lock_files(graph):
    """Locks and bundles are read and checked by tfgpu.lock, which hands installers a Source."""
    offenders = sorted(
        m for m, targets in graph.items() if unit(m) == "installers" and any(unit(t) == "lock" for t in targets)
    )
    assert offenders == []


LOCK_FORMATS = ("pip", "conda", "bundle")
"""tfgpu/lock/'s folders, one per format, each with its writing and reading."""
LOCK_FORMATS_USED = {"pip": set(), "conda": set(), "bundle": {"pip", "conda"}}
"""Which other format's folder a format's folder may use: a bundle holds a pip or a conda lock."""


def lock_format(module: str) -> str | None:
    """The format folder a module lies in (tfgpu.lock.pip.write -> pip), or None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["tfgpu", "lock"] and parts[2] in LOCK_FORMATS else None


def test_a_lock_format_folder_uses_no_other_formats_folder(graph):
    """pip/ and conda/ never import each other (what both need lives at tfgpu/lock/'s top); bundle/
    may use both, since a bundle holds a lock; no format's folder imports the face above it."""
    offenders = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if lock_format(m)
        for t in targets
        if t == "tfgpu.lock"
        or (lock_format(t) not in (None, lock_format(m)) and lock_format(t) not in LOCK_FORMATS_USED[lock_format(m)])
    )
    assert offenders == []


def test_the_shared_lock_modules_import_no_format_folder(graph):
    """At tfgpu/lock/'s top, only the package's face (tfgpu/lock/__init__.py, which dispatches by mode
    or by the lock file given) imports a format's folder; platforms, targets, selectors, resolving,
    tools and check serve every format and know none."""
    shared = [m for m in graph if m.startswith("tfgpu.lock.") and lock_format(m) is None]
    assert "tfgpu.lock.check" in shared and "tfgpu.lock.selectors" in shared
    offenders = sorted(f"{m} -> {t}" for m in shared for t in graph[m] if lock_format(t))
    assert offenders == []


def test_the_cli_calls_only_the_lock_faces_and_decides_nothing_by_mode(graph):
    """The command line hands its inputs to tfgpu.lock (write, check_lock, prepare) and
    tfgpu.lock.bundle (build): which format does the work, the --channel rules and the refusals
    are the lock package's. The CLI imports no module inside a format's folder, and the lock and
    bundle commands hold no test of the mode."""
    faces = {"tfgpu.lock", "tfgpu.lock.bundle"}
    offenders = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        if unit(m) == "cli"
        for t in targets
        if lock_format(t) and t not in faces
    )
    assert offenders == []
    functions = {
        node.name: node
        for path in (ROOT / "cli" / "commands").glob("*.py")
        for node in walked(path)
        if isinstance(node, ast.FunctionDef)
    }
    for name in ("cmd_lock", "lock_check", "cmd_bundle"):
        function = functions[name]
        names = {n.id for n in ast.walk(function) if isinstance(n, ast.Name)} | {
            alias.name for n in ast.walk(function) if isinstance(n, ast.ImportFrom) for alias in n.names
        }
        assert not names & {"mode_of", "check_channels_for", "channel_urls", "check_channels"}, name
        compared = [
            c.value
            for n in ast.walk(function)
            if isinstance(n, ast.Compare)
            for c in (n.left, *n.comparators)
            if isinstance(c, ast.Constant)
        ]
        assert not {"pip", "conda", "system"} & set(compared), f"{name} compares with a mode"
        tested = [
            ast.unparse(n)
            for n in ast.walk(function)
            if isinstance(n, ast.Compare)
            and any(isinstance(c, ast.Attribute) and c.attr == "mode" for c in ast.walk(n))
        ]
        assert tested == [], f"{name} tests the mode: {tested}"


def test_the_resolver_imports_no_engine_backend_or_process_door(graph):
    """resolver/ is pure: it reads tables (through tfgpu.data) and the Host it is given, and makes its
    requirements through the requirement door (tfgpu.doors.requirements, itself pure); what the user
    described arrives as ``tfgpu.settings.Selectors``, plain data that imports nothing of the tool but
    the record helper."""
    assert graph["tfgpu.settings"] <= {"tfgpu.records"} and graph["tfgpu.records"] == set()
    allowed = {"resolver", "data", "errors", "detect", "doors.requirements", "versions", "settings", "records"}
    offenders = {
        m: sorted(t for t in targets if unit(t) not in allowed) for m, targets in graph.items() if unit(m) == "resolver"
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_child_processes_start_only_in_the_door():
    offenders = []
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == "process/runner.py" or relative in IN_TARGET_ENV or relative.startswith(TEMPLATE_DIRS):
            continue
        for node in walked(path):
            if isinstance(node, ast.Import) and any(a.name in ("subprocess", "multiprocessing") for a in node.names):
                offenders.append(relative)
            elif isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "multiprocessing"):
                offenders.append(relative)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("system", "popen", "execv", "execvp", "spawnv", "fork", "posix_spawn")
            ):
                offenders.append(relative)
    assert sorted(set(offenders)) == []


def test_rattlers_asynchronous_work_runs_only_in_the_engine_process():
    """py-rattler's solve, install, gateway and indexer start native threads that can abort the
    interpreter as it exits: only ``engines/rattler_child.py`` (a process of its own) calls them;
    the tool builds rattler's plain records only."""
    asynchronous = {"solve", "install", "Gateway", "SourceConfig", "index_fs"}
    offenders = []
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == "engines/rattler_child.py" or relative.startswith(TEMPLATE_DIRS):
            continue
        for node in walked(path):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.split(".")[0] == "rattler"
                and (node.module != "rattler" or any(a.name in asynchronous for a in node.names))
            ):
                offenders.append(f"{relative}: from {node.module} import ...")
            elif isinstance(node, ast.Import) and any(
                a.name.split(".")[0] in ("rattler", "asyncio") for a in node.names
            ):
                offenders.append(f"{relative}: import {', '.join(a.name for a in node.names)}")
    assert sorted(set(offenders)) == []


MODULE_LINES = 500
"""A module a newcomer reads in one sitting. Counted on ``ruff format``'s layout (120 columns, one
argument a line where a call does not fit): the 400 lines this limit was before the formatter ran
are about 500 of its lines."""


def test_no_module_over_the_line_limit():
    sizes = {path.relative_to(ROOT).as_posix(): len(text(path).splitlines()) for path in package_files()}
    assert {name: size for name, size in sizes.items() if size > MODULE_LINES} == {}


# The one reader for untrusted files: outside tfgpu/doors/untrusted.py (and code that runs in the target
# env), nothing parses JSON/TOML/YAML or opens a file for reading. Writing stays with the caller.
PARSERS = {
    ("json", "load"),
    ("json", "loads"),
    ("tomllib", "load"),
    ("tomllib", "loads"),
    ("yaml", "load"),
    ("yaml", "safe_load"),
    ("yaml", "full_load"),
    ("yaml", "unsafe_load"),
    ("yaml", "load_all"),
    ("yaml", "safe_load_all"),
    ("yaml", "parse"),
    ("yaml", "compose"),
    ("yaml", "compose_all"),
}
ARCHIVE_MODULES = {"tarfile", "gzip", "bz2", "lzma", "io", "codecs", "zipfile"}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT"}
FOREIGN_READERS = {"parse_conda_lock_file"}
"""Other libraries' functions that open and parse a file themselves, unbounded."""


def _strings(node: ast.AST, assigned: dict[str, list[ast.AST]]) -> list[str] | None:
    """The string constants a mode expression can take (a name: every value the module assigns it);
    None when it can be anything."""
    if isinstance(node, ast.Name):
        values = assigned.get(node.id)
        if not values:
            return None
        found = []
        for value in values:
            strings = _strings(value, {})
            if strings is None:
                return None
            found += strings
        return found
    strings = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    if not strings or not all(
        isinstance(n, (ast.Constant, ast.IfExp, ast.Compare, ast.Name, ast.Attribute, ast.BoolOp, ast.UnaryOp))
        for n in ast.walk(node)
    ):
        return None
    return strings


def _assignments(source: str) -> dict[str, list[ast.AST]]:
    """name -> every value assigned to it in the module (tuple assignments paired element-wise)."""
    found: dict[str, list[ast.AST]] = {}
    for node in nodes(source):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts, strict=False))
                for name, value in pairs:
                    if isinstance(name, ast.Name):
                        found.setdefault(name.id, []).append(value)
    return found


def _reads(mode: ast.AST | None, assigned) -> bool:
    if mode is None:
        return True
    strings = _strings(mode, assigned)
    return strings is None or any(not set(s) & set("wax") for s in strings)


def reads_around_the_door(source: str) -> list[str]:
    """Each call in ``source`` that reads a file or parses a document without tfgpu.doors.untrusted."""
    assigned = _assignments(source)
    found = []
    for node in nodes(source):
        if not isinstance(node, ast.Call):
            continue
        func, where = node.func, f"line {node.lineno}"
        keywords = {k.arg: k.value for k in node.keywords}
        if (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)) in FOREIGN_READERS:
            found.append(f"{where}: a library's own file reader")
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id, func.attr) in PARSERS
        ):
            found.append(f"{where}: {func.value.id}.{func.attr}")
        elif isinstance(func, ast.Attribute) and func.attr in ("read_text", "read_bytes"):
            if not (isinstance(func.value, ast.Name) and func.value.id == "untrusted"):
                found.append(f"{where}: .{func.attr}()")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "open"
            and isinstance(func.value, ast.Name)
            and func.value.id == "os"
        ):
            flags = {
                n.attr if isinstance(n, ast.Attribute) else getattr(n, "id", None)
                for arg in node.args[1:2]
                for n in ast.walk(arg)
            }
            if not flags & WRITE_FLAGS:
                found.append(f"{where}: os.open for reading")
        elif (
            isinstance(func, ast.Name)
            and func.id == "open"
            or (
                isinstance(func, ast.Attribute)
                and func.attr == "open"
                and isinstance(func.value, ast.Name)
                and func.value.id in ARCHIVE_MODULES
            )
        ):
            if not node.args and "fileobj" in keywords:
                continue  # an archive over a file object the door opened
            mode = node.args[1] if len(node.args) > 1 else keywords.get("mode")
            if _reads(mode, assigned):
                found.append(f"{where}: open() for reading")
        elif isinstance(func, ast.Attribute) and func.attr == "open":  # Path.open(mode)
            first = node.args[0] if node.args else None
            if (
                isinstance(first, ast.Call)
                and (getattr(first.func, "attr", None) or getattr(first.func, "id", None)) == "Request"
            ):
                continue  # an HTTP request through urllib's opener: the URL door's concern, not a file
            mode = node.args[0] if node.args else keywords.get("mode")
            if _reads(mode, assigned):
                found.append(f"{where}: .open() for reading")
    return found


def test_untrusted_files_are_read_only_through_the_door():
    offenders = {}
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == "doors/untrusted.py" or relative in IN_TARGET_ENV or relative.startswith(TEMPLATE_DIRS):
            continue
        found = reads_around_the_door(text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        "import json\njson.loads(text)",
        "import json\njson.load(handle)",
        "import tomllib\ntomllib.loads(t)",
        "import yaml\nyaml.safe_load(t)",
        "import yaml\nyaml.compose(t)",
        "path.read_text(encoding='utf-8')",
        "files('x').joinpath('y').read_bytes()",
        "open(path)",
        "open(path, 'rb')",
        "open(path, mode='r+')",
        "path.open()",
        "path.open('rb')",
        "import tarfile\ntarfile.open(archive, 'r:*')",
        "import os\nos.open(path, os.O_RDONLY | os.O_NONBLOCK)",
        "mode = 'rb'\nopen(path, mode)",
        "from conda_lock.lockfile import parse_conda_lock_file\nparse_conda_lock_file(path)",
    ],
)
def test_the_door_check_sees_each_way_around(source):
    assert reads_around_the_door(source)


@pytest.mark.parametrize(
    "source",
    [
        "from tfgpu import untrusted\nuntrusted.read_text(p, untrusted.PIP_LOCK)",
        "open(path, 'w')",
        "open(path, 'ab')",
        "path.open('a', encoding='utf-8')",
        "import os\nos.fdopen(fd, 'wb')",
        "import os\nos.open(path, os.O_RDWR | os.O_CREAT, 0o644)",
        "import json\njson.dumps(value)",
        "mode, done = 'ab', 1\nmode, done = 'wb', 0\nopen(part, mode)",
        "import tarfile\ntarfile.open(fileobj=raw, mode='r:*')",
        "import urllib.request\nopener.open(urllib.request.Request(url), timeout=5)",
    ],
)
def test_the_door_check_lets_writes_through(source):
    assert reads_around_the_door(source) == []


def _imported_names(path: Path) -> set[str]:
    found = set()
    for node in walked(path):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_only_the_front_door_imports_argparse():
    """The parsed command line never leaves ``tfgpu.cli``: operations take a ``Settings``."""
    offenders = sorted(
        name
        for name, path in modules().items()
        if "argparse" in _imported_names(path) and not name.startswith("tfgpu.cli")
    )
    assert offenders == []


def test_no_operation_imports_the_command_line(graph):
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if unit(module) != "cli" and module != "tfgpu.__main__"
        for target in targets
        if unit(target) == "cli"
    )
    assert offenders == []


def test_every_option_is_defined_once():
    """``add_argument`` only in ``tfgpu/cli/options.py`` (and the parser's own --version and the
    completion command's shell): a command lists options, it never defines one."""
    offenders = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        for node in walked(path):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"
                and path.name != "options.py"
            ):
                first = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
                if (path.name, first) not in (("parser.py", "--version"), ("grammar.py", "shell")):
                    offenders.append(f"{path.name}:{node.lineno} {first}")
    assert offenders == []


def test_commands_take_the_settings_and_return_a_typed_result():
    import inspect
    import typing

    from tfgpu import results
    from tfgpu.cli import commands, output
    from tfgpu.cli.parser import COMMANDS
    from tfgpu.settings import Settings

    assert set(commands.COMMANDS) == set(COMMANDS)  # the command table and the grammar name the same commands
    for command in commands.COMMANDS:
        handler = commands.handler(command)
        hints = typing.get_type_hints(handler)
        assert list(inspect.signature(handler).parameters) == ["settings"], command
        assert hints["settings"] is Settings and hints["return"] is results.Result, command
    kinds = {
        kind
        for kind in vars(results).values()
        if isinstance(kind, type) and issubclass(kind, results.Result) and kind is not results.Result
    }
    assert kinds == set(output._TEXT)  # every result has its one text form


def test_json_documents_are_written_in_one_place():
    """``--json`` output is ``tfgpu.cli.output.show``'s (and an error's, in ``tfgpu.cli``)."""
    offenders = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        if path.name in ("output.py", "__init__.py"):
            continue
        if "json.dumps" in text(path):
            offenders.append(path.name)
    assert offenders == []


# Turning a name into a directory: ``prefix_for`` (the tool's envs directory), ``envs_dir`` and the
# conda installation's envs directories. Which *existing* env a command means is answered by
# tfgpu/envs/which.py alone; the only other callers place a *new* env (create: where ``--name``
# puts it), each named here with its function, so a command that looks a name up itself fails.
NAME_TO_PATH = {"prefix_for", "envs_dir", "conda_envs_dir", "conda_envs_dirs"}
PLACES_A_NEW_ENV = {
    ("envs/location.py", "prefix_for"),  # the tool's envs directory, for a new env
    ("envs/location.py", "locate"),  # create's target, checked before anything is written
    ("envs/conda_envs.py", "conda_envs_dir"),  # the first of conda's envs dirs: where a new env goes
    ("ops.py", "create"),
    ("installers/conda.py", "prefix_for_name"),  # create --mode conda --name N
    ("installers/system.py", "unchanged"),  # system mode run again over the same target
    ("installers/system.py", "survey"),  # system mode: is the target the tool's envs directory
    ("cache/uvdir.py", "uv_cache"),  # is uv's cache on the file system new envs go to
    ("cache/__init__.py", "operate"),  # the envs whose creation a cache clean waits for
}


def _calls_by_function(source: str):
    """(enclosing function, called name) for every call of a plain or dotted name."""
    above = parents(source)
    for node in nodes(source):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name:
            up = above.get(node)
            while up is not None and not isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
                up = above.get(up)
            yield ("<module>" if up is None else up.name), name


def test_only_the_which_env_module_turns_a_name_into_an_existing_env():
    offenders = []
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == "envs/which.py" or relative.startswith(TEMPLATE_DIRS):
            continue
        for function, name in _calls_by_function(text(path)):
            if name in NAME_TO_PATH and (relative, function) not in PLACES_A_NEW_ENV:
                offenders.append(f"{relative}: {function}() calls {name}()")
    assert sorted(set(offenders)) == []


LIVE_DISPLAYS = {"rich.live", "rich.progress", "rich.status", "rich.spinner"}


def test_only_the_console_reporter_draws_in_place():
    """A display redrawn in place stacks a copy of itself on every redraw when one of its lines is
    wider than the terminal: ``tfgpu.cli.render.live`` runs the one live display, on ``tfgpu.cli.render.bars``'s lines cut
    to the width. Another module with a rich live display, progress bar, status or spinner (or a
    console's ``.status()``) would go around that."""
    offenders = []
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in ("cli/render/live.py", "cli/render/bars.py") or relative.startswith(TEMPLATE_DIRS):
            continue
        for node in walked(path):
            if isinstance(node, ast.ImportFrom) and node.module in LIVE_DISPLAYS:
                offenders.append(f"{relative}: from {node.module} import")
            elif isinstance(node, ast.Import):
                offenders += [f"{relative}: import {a.name}" for a in node.names if a.name in LIVE_DISPLAYS]
            elif isinstance(node, ast.Attribute) and node.attr == "status" and "console" in ast.unparse(node.value):
                offenders.append(f"{relative}: {ast.unparse(node)}")
    assert sorted(set(offenders)) == []


# -- what `plan` imports ----------------------------------------------------------------------
# `plan --json` answers in a few tens of milliseconds when it imports only what it uses. This holds
# that without timing anything: the modules a plan may load are listed, and a module added to its
# path (an eager import of the CLI's other commands, of rich, of a backend) fails here by name.

PLAN_MAY_IMPORT = {
    "tfgpu",
    "tfgpu.errors",
    "tfgpu.doors",  # the folders' faces: a docstring each
    "tfgpu.process",
    "tfgpu.doors.paths",
    "tfgpu.process.interrupts",
    "tfgpu.project",
    "tfgpu.doors.untrusted",
    "tfgpu.doors.owner",  # the reader's rule for the tool's own caches (read_own): os and stat alone
    "tfgpu.versions",
    "tfgpu.doors.requirements",
    "tfgpu.doors.controls",  # the requirement door's set of control characters (no pattern compiled)
    "tfgpu.doors.secrets",  # output is redacted (a --channel's token): os and re alone
    "tfgpu.cli",
    "tfgpu.cli.commands",
    "tfgpu.cli.commands.plan",
    "tfgpu.cli.grammar",  # which command takes which option, read without argparse
    "tfgpu.cli.output",
    "tfgpu.cli.options",
    "tfgpu.cli.inputs",
    "tfgpu.settings",
    "tfgpu.records",
    "tfgpu.results",
    "tfgpu.data",
    "tfgpu.data.updates",
    *(
        f"tfgpu.resolver.{name}"
        for name in (
            "archtruth",
            "candidates",
            "core",
            "drivers",
            "evaluate",
            "gpu",
            "macos",
            "model",
            "newgpu",
            "notices",
            "packages",
            "releases",
            "request",
            "tables",
            "target",
            "tfsource",
        )
    ),
    "tfgpu.resolver",
}
"""With ``--no-detect``; detection adds ``tfgpu.detect.*`` (and, where a driver answers, what reads it)."""
PLAN_NEEDS_NOT = {
    "argparse",
    "gettext",
    "tfgpu.cli.parser",
    "pathlib",
    "urllib",
    "ipaddress",
    "tfgpu.doors.urls",
    "tfgpu.process.runner",
    "tfgpu.data.schema",
    "dataclasses",
    "typing",
    "inspect",
    "ast",
    "packaging",
    "hashlib",
    "shutil",
    "subprocess",
    "tempfile",
    "threading",
    "ctypes",
    "platform",
    "logging",
    "tomllib",
    "zipfile",
    "importlib.resources",
    "packaging.requirements",
    "packaging.markers",
    "platformdirs",
    "rich",
    "yaml",
    "requests",
    "urllib3",
    "rattler",
    "pynvml",
    "uv",
}
"""Heavy modules a plan does not use: ``argparse`` (with ``gettext``; its options are read by
``tfgpu.cli.grammar.quick``, argparse answering only what that leaves to it), ``pathlib`` (and the ``urllib.parse`` and ``ipaddress`` it
imports; a plan's few paths are text, read through ``os.path``), ``dataclasses`` and ``typing`` (and the ``inspect``/``ast``
they bring; the records are ``tfgpu.records``'), ``packaging`` (the tables' plain versions and
ranges are read by ``tfgpu.versions``), ``hashlib`` (the cache digest comes from ``_blake2``), child
processes, the
URL door (no URL in a plan), the schema and the parsers of what the parsed-data cache already holds
(a cache only this user can write is used as written), the full requirement grammar
(simple requirements are rendered without it), the output and network libraries of other commands."""


def test_plan_imports_only_what_it_uses(tmp_path):
    import json
    import os
    import subprocess
    import sys

    script = (
        "import contextlib, io, json, sys\nfrom tfgpu.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['plan', '--json', '--no-detect', '--tf', '2.13', '--mode', 'conda'])\n"
        "print(json.dumps([code, sorted(sys.modules)]))\n"
    )
    env = {
        **os.environ,
        "TFGPU_CACHE_DIR": str(tmp_path / "cache"),
        "TFGPU_USER_DATA_DIR": str(tmp_path / "data"),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": "",
        "XDG_DATA_HOME": "",
    }
    env.pop("TFGPU_DATA_DIR", None)
    env.pop("TFGPU_INSECURE_HOSTS", None)  # the suite names its loopback server; a plain plan names none
    for _run in ("first", "cached"):  # the first run parses the tables and writes the cache
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        code, loaded = json.loads(done.stdout)
    assert code == 0
    ours = {name for name in loaded if name.split(".")[0] == "tfgpu"}
    assert sorted(ours - PLAN_MAY_IMPORT) == []
    assert sorted(name for name in loaded if name in PLAN_NEEDS_NOT or name.split(".")[0] in PLAN_NEEDS_NOT) == []


_LIBRARY_READERS = {"read_dynamic", "parse_dynamic", "unversioned_exports", "parse_exports", "Image"}


def library_reads_around_the_door(source: str) -> list[str]:
    """Each use in ``source`` of the ELF reader's entry points (``elf.parse_dynamic``, ``Image`` …),
    or of the ELF magic, which would parse a library without the run's byte budget."""
    found = []
    for node in nodes(source):
        if isinstance(node, ast.Attribute) and node.attr in _LIBRARY_READERS:
            if isinstance(node.value, ast.Name) and node.value.id == "elf":
                found.append(f"line {node.lineno}: elf.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("doctor.elf"):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name in _LIBRARY_READERS]
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes) and b"\x7fELF" in node.value:
            found.append(f"line {node.lineno}: the ELF magic")
    return found


def test_libraries_are_read_only_through_the_runs_budgeted_reader():
    """An env's libraries are parsed only by ``tfgpu.doctor.elf`` and only through
    ``tfgpu.doctor.reads.RunReads``, which passes the run's byte budget (per file and in all) and
    keeps what was not fully read for the command to say: a reader that went around it would read
    a crafted library unbounded, or take it silently for no library."""
    offenders = {}
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in ("doctor/elf.py", "doctor/reads.py") or relative in IN_TARGET_ENV:
            continue
        found = library_reads_around_the_door(text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}


@pytest.mark.parametrize(
    "source",
    [
        "from tfgpu.doctor import elf\nelf.parse_exports(data)\n",
        "from tfgpu.doctor import elf\nimage = elf.Image.of_bytes(data)\n",
        "from tfgpu.doctor.elf import read_dynamic\n",
        "ok = head[:4] == b'\\x7fELF'\n",
    ],
)
def test_the_library_door_check_sees_each_way_around(source):
    assert library_reads_around_the_door(source)


TRANSPORT = "datasource/transport.py"
"""The tool's one HTTP transport: the only module that speaks HTTP itself."""
HTTP_LIBRARIES = ("urllib.request", "urllib.error", "http.client", "requests", "urllib3", "httpx", "aiohttp")


def http_imports(source: str) -> list[str]:
    """Each import in ``source`` of an HTTP client library, however spelt (``from urllib import
    request``, ``import http.client as c``, ``importlib.import_module("requests")``)."""

    def library(name: str) -> bool:
        return any(name == lib or name.startswith(lib + ".") for lib in HTTP_LIBRARIES)

    found = []
    for node in nodes(source):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) in (
            "import_module",
            "__import__",
        ):
            names = [arg.value for arg in node.args[:1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        found += [f"line {node.lineno}: {name}" for name in names if library(name)][:1]
    return found


def test_only_the_transport_imports_an_http_library():
    """Redirects, deadlines, retries, proxies and certificates are decided once, in the transport:
    a module that opened its own connection would follow a redirect the URL door never saw."""
    offenders = {}
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == TRANSPORT or relative.startswith(TEMPLATE_DIRS):
            continue
        found = http_imports(text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}
    assert http_imports(text(ROOT / TRANSPORT))  # the check sees the transport's own


@pytest.mark.parametrize(
    "source",
    [
        "import urllib.request",
        "from urllib import request",
        "from urllib.request import urlopen",
        "import http.client as connection",
        "from http import client",
        "def f():\n    import requests",
        "from requests.adapters import HTTPAdapter",
        "import urllib3",
        "import importlib\nimportlib.import_module('urllib.request')",
        "__import__('requests')",
    ],
)
def test_the_http_library_check_sees_each_spelling(source):
    assert http_imports(source)


@pytest.mark.parametrize(
    "source",
    [
        "from tfgpu.datasource import transport",
        "import urllib.parse",
        "from http import HTTPStatus",
        "import http",
        "text = 'import urllib.request; urllib.request.urlretrieve(u)'",
    ],
)
def test_the_http_library_check_lets_the_rest_through(source):
    assert http_imports(source) == []


# -- where imports sit -------------------------------------------------------------------------
# The start-up budget is kept in one seam, ``tfgpu.cli.commands``' table: a command's module is
# imported only when that command runs. Everywhere else imports sit at the top of the module; one
# inside a function says why on its line or in the comment just above it (a start-up-counted command
# would load more, an import cycle, a test's stand-in), or is a fallback tried under ``except ImportError``.
RUN_ELSEWHERE = {
    *IN_TARGET_ENV,
    "verify/matmul_bench.py",
    "envs/activation.py",
    "records.py",
    "engines/rattler_child.py",
}
"""Run by another interpreter (the target env's, which may be Python 2.7); the record helper; and
rattler's child process, which imports rattler inside each operation so that a rattler that cannot
be imported comes back as that operation's answer (``{"error": ...}``), as every other failure does."""


def function_level_imports_without_a_reason(source: str) -> list[str]:
    lines = source.split("\n")
    above = parents(source)
    found = []
    for node in nodes(source):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        enclosing = [above[node]]  # every node above the import, up to the module
        while enclosing[-1] in above:
            enclosing.append(above[enclosing[-1]])
        if not any(isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef) for up in enclosing):
            continue  # at module level (or in a class body): where imports sit
        first = node.lineno - 1  # the first import line of the group this one belongs to
        while first > 0 and lines[first - 1].strip().startswith(("from ", "import ")):
            first -= 1
        said = "#" in lines[node.lineno - 1] or (first > 0 and lines[first - 1].strip().startswith("#"))
        guarded = any(
            isinstance(up, ast.Try)
            and any("ImportError" in ast.unparse(handler.type or ast.Name("BaseException")) for handler in up.handlers)
            for up in enclosing
        )
        if not (said or guarded):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_imports_sit_at_the_top_unless_a_comment_says_why():
    offenders = {}
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in RUN_ELSEWHERE or relative.startswith(TEMPLATE_DIRS):
            continue
        found = function_level_imports_without_a_reason(text(path))
        if found:
            offenders[relative] = found
    assert offenders == {}


def test_an_import_inside_a_function_without_a_reason_is_found():
    source = "def f():\n    import json\n\n    return json\n\n\ndef g():\n    # Import cycle: a.b imports this module.\n    from a import b\n"
    assert function_level_imports_without_a_reason(source) == ["line 2: import json"]


def test_no_private_module_of_the_interpreter_is_imported():
    """``signal``, ``ctypes`` and the like, not the C modules under them (``_signal``, ``_ctypes``):
    only the record helper (``_collections._tuplegetter``) and the table cache's digest (``_blake2``,
    whose reason ``tfgpu.data._digest`` gives in numbers) do."""
    offenders = []
    for path in package_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative in ("records.py", "data/__init__.py"):
            continue
        for node in walked(path):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            offenders += [f"{relative}: {name}" for name in names if name.startswith("_") and name != "__future__"]
    assert offenders == []
