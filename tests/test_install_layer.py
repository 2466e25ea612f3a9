"""The install layer: ``create`` and ``repair`` put packages into envs through one set of engines
(``tfgpu.installers.engine``), and the errors those raise are built in one place each.

The engine tests use real uv, a real venv and real wheels (tests/wheelhouse.py) from a local
directory, offline; nothing is faked.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import packagesource
import pytest
import wheelhouse

import tfgpu
from tfgpu.errors import ImpossibleError
from tfgpu.installers.engine import Intended, PackageEngine, RattlerEngine, UvEngine, Wanted
from tfgpu.process.runner import Runner
from tfgpu.progress import Reporter

ROOT = Path(tfgpu.__file__).parent
ENGINE = "installers/engine.py"
INSTALLS = {
    "tfgpu.engines.uv": {"install", "uninstall", "venv", "compile_hashed", "inventory"},
    "tfgpu.engines.rattler_engine": {"install", "locked_records", "solve"},
}
"""What puts packages into an env (or solves what goes in): only the engine layer calls these."""
LOCKING = ("lock/",)
"""Locks solve with rattler too, to write a lock, not to install: their solve is theirs."""


@functools.cache
def _package_facts() -> tuple[dict[str, list[str]], dict[object, tuple[str, ...]], set[tuple[str, str]]]:
    """What the checks of this file read from the package's modules, each module's nodes read
    from tests/packagesource.py (parsed and walked once per test process for every test that reads
    the package's source, which is most of what these checks cost): its
    :func:`_engine_calls` by module, every constant a call takes as its first argument (either
    branch of a conditional one) with the places of those calls, and the ``tfgpu.engines`` names
    that ``repair/`` imports."""
    calls: dict[str, list[str]] = {}
    constants: dict[object, list[str]] = {}
    repair_imports: set[tuple[str, str]] = set()
    for path in packagesource.modules():
        relative = path.relative_to(packagesource.PACKAGE).as_posix()
        nodes = packagesource.walked(path)
        calls[relative] = _engine_calls(nodes)
        for node in nodes:
            if relative.startswith("repair/"):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfgpu.engines"):
                    repair_imports |= {(node.module, a.name) for a in node.names}
                elif isinstance(node, ast.Import):
                    repair_imports |= {(a.name, "") for a in node.names if a.name.startswith("tfgpu.engines")}
            if not (isinstance(node, ast.Call) and node.args):
                continue
            first = node.args[0]
            codes = [first] if isinstance(first, ast.Constant) else []
            codes += [first.body, first.orelse] if isinstance(first, ast.IfExp) else []
            for value in {c.value for c in codes if isinstance(c, ast.Constant)}:
                constants.setdefault(value, []).append(f"{relative}:{node.lineno}")
    return calls, {value: tuple(places) for value, places in constants.items()}, repair_imports


def _engine_calls(nodes: tuple[ast.AST, ...]) -> list[str]:
    """``module.function`` calls (and imports) of :data:`INSTALLS` among a module's ``nodes``
    (``packagesource.nodes`` of its text)."""
    bound: dict[str, str] = {}
    found = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module == "tfgpu.engines":
            bound |= {a.asname or a.name: f"tfgpu.engines.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module in INSTALLS:
            found += [f"{node.module}.{a.name}" for a in node.names if a.name in INSTALLS[node.module]]
        elif isinstance(node, ast.Import):
            bound |= {a.asname or a.name: a.name for a in node.names if a.name in INSTALLS}
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr in INSTALLS.get(module, ()):
                found.append(f"{module}.{node.attr}")
    return found


def test_packages_go_into_envs_only_through_the_engine_layer():
    offenders = {}
    for relative, calls in _package_facts()[0].items():
        if relative.startswith("engines/") or relative == ENGINE:
            continue
        if relative.startswith(LOCKING):
            calls = [c for c in calls if c != "tfgpu.engines.rattler_engine.solve"]
        if calls:
            offenders[relative] = calls
    assert offenders == {}


def test_the_engine_check_sees_each_way_around():
    for text in (
        "from tfgpu.engines import uv as u\nu.install('uv', 'py', 'r')\n",
        "from tfgpu.engines import rattler_engine as rattler\nrattler.install([], 'a', 'b')\n",
        "from tfgpu.engines.uv import uninstall\n",
        "import tfgpu.engines.rattler_engine\n",  # bound as tfgpu: a dotted call is not looked at, and none is here
    ):
        assert bool(_engine_calls(packagesource.nodes(text))) is ("import tfgpu.engines.rattler_engine\n" != text), text


def test_create_and_repair_hold_the_same_engines():
    """create's backends and repair's engines are the same classes, under one interface."""
    from tfgpu.installers.conda import CondaBackend
    from tfgpu.installers.pip import PipBackend

    assert issubclass(UvEngine, PackageEngine) and issubclass(RattlerEngine, PackageEngine)
    assert PackageEngine.__abstractmethods__ == {"intended", "install", "undo"}
    pip = PipBackend("/bin/uv", Path("/nonexistent/cache/uv"), sys.executable)
    conda = CondaBackend("rattler", None, "/bin/uv", Path("/nonexistent/cache"))
    assert isinstance(pip.packages, UvEngine) and isinstance(conda.pypi, UvEngine)
    assert isinstance(conda.conda, RattlerEngine)
    assert conda.conda.packages == Path("/nonexistent/cache/conda/verified-pkgs")
    assert not (ROOT / "repair" / "packages.py").exists()  # repair's own package code is gone


def _errors_built(code: str) -> list[str]:
    """Where a ``TfgpuError`` with ``code`` is constructed (``SomeError("code", ...)``)."""
    return list(_package_facts()[1].get(code, ()))


@pytest.mark.parametrize(
    "code", ["uv-missing", "undo-failed", "repair-conflict", "nothing-to-undo", "repair-journal-foreign"]
)
def test_an_error_of_the_install_layer_is_built_in_one_place(code):
    assert len(_errors_built(code)) == 1, _errors_built(code)


def _venv(tmp_path: Path, wheels: Path, *requirements: str) -> Path:
    from tfgpu.engines.uv import find_uv

    prefix = tmp_path / "env"
    uv = find_uv()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(prefix)], check=True)
    python = prefix / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), "--no-index", "--find-links", str(wheels)]
        + list(requirements),
        check=True,
    )
    return prefix


def _site(prefix: Path) -> Path:
    return next(prefix.glob("lib/python3*/site-packages"))


@pytest.fixture
def engine_env(tmp_path):
    from tfgpu.engines.uv import find_uv

    wheels = tmp_path / "wheels"
    for dist, version in (("held", "1.0"), ("held", "2.0"), ("cuda-part", "1.0")):
        wheelhouse.wheel(
            wheels, dist, version, {f"{dist.replace('-', '_')}/__init__.py": f"v = {version!r}\n".encode()}
        )
    prefix = _venv(tmp_path, wheels, "held==1.0")
    engine = UvEngine(
        find_uv(),
        tmp_path / "uv-cache",
        python=prefix / "bin" / "python",
        runner=Runner(tmp_path / "engine.log"),
        find_links=str(wheels),
        offline=True,
    )
    return prefix, engine


def test_the_uv_engine_names_what_it_adds_adds_it_keeping_the_rest_and_takes_it_out(engine_env):
    prefix, engine = engine_env
    wanted = Wanted(requirements=("cuda-part",), held=(("held", "1.0"),))
    assert engine.intended(wanted, Reporter()) == [Intended("cuda-part", "1.0")]
    assert not list(_site(prefix).glob("cuda_part-*.dist-info"))  # naming it changed nothing
    engine.install(wanted, Reporter())
    assert list(_site(prefix).glob("cuda_part-1.0.dist-info")) and list(_site(prefix).glob("held-1.0.dist-info"))
    engine.undo(["cuda-part"], {}, Reporter())
    assert not list(_site(prefix).glob("cuda_part-*.dist-info")) and list(_site(prefix).glob("held-1.0.dist-info"))


def test_the_uv_engine_refuses_to_move_a_held_package_and_changes_nothing(engine_env):
    prefix, engine = engine_env
    with pytest.raises(ImpossibleError) as refused:
        engine.install(Wanted(requirements=("held==2.0",), held=(("held", "1.0"),)), Reporter())
    assert refused.value.code == "repair-conflict"
    assert "nothing was changed" in refused.value.message
    assert any("engine.log" in line for line in refused.value.alternatives)
    assert list(_site(prefix).glob("held-1.0.dist-info"))


def test_repair_reaches_the_engines_only_through_the_install_layer():
    """repair/ names no engine module but to check a --find-links path (``find_links_source``)."""
    allowed = {("tfgpu.engines.uv", "find_links_source")}
    found = _package_facts()[2]
    assert found <= allowed, found - allowed
