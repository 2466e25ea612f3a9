"""The URL door holds (``tfgpu/doors/urls.py``): no module reads a URL its own way, the tool's one HTTP
transport is the only module that opens connections, and it sends every URL and every redirect
target through the door. Read from the source (AST), so a new path that goes around the
door fails here, not in a user's hands.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

import tfgpu

ROOT = Path(tfgpu.__file__).parent
TEMPLATE_DIRS = ("envs/templates/", "export/templates/")
DOOR = "doors/urls.py"
# The tool's one HTTP transport: the only module that may open a connection.
CLIENTS = {"datasource/transport.py": "urllib"}
# Modules that make the URLs handed to an engine (uv on its command line; rattler's channels, which
# engines/channels.py makes for engines/rattler_engine.py).
HANDERS = ("engines/uv.py", "engines/channels.py")
SPLITTERS = {
    "urlsplit",
    "urlparse",
    "urljoin",
    "urlunsplit",
    "urlunparse",
    "urldefrag",
    "splithost",
    "splituser",
    "parse_url",
    "urlopen",
    "build_opener",
}
NETWORK_MODULES = ("requests", "urllib.request", "urllib3", "http.client", "httpx", "aiohttp", "socket")
# Binds loopback ports for its worker processes (a TF_CONFIG cluster); it fetches nothing.
NO_FETCH = {"verify/multiworker.py"}
DOOR_CALLS = {"checked", "join", "parse", "redirect"}


WORDS = ("urllib", *SPLITTERS, "requests", "httpx", "aiohttp", "socket", "http", "is_secure", "is_loopback")
"""Every name the tests below look for is spelled in a module that imports, calls or names it (an
import of ``http.client`` holds ``http``, ``urllib.parse`` and ``urllib3`` hold ``urllib``)."""


def sources() -> dict[str, ast.Module]:
    """Every module's tree. One whose text spells none of :data:`WORDS` cannot hold what these tests
    look for, and stands as an empty tree (parsing the whole package cost a second of CPU; four
    fifths of it is such modules); the door, the clients and the handers are always parsed."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(TEMPLATE_DIRS):
            continue
        text = path.read_text(encoding="utf-8")
        named = relative == DOOR or relative in CLIENTS or relative in HANDERS or any(w in text for w in WORDS)
        found[relative] = ast.parse(text) if named else ast.Module(body=[], type_ignores=[])
    return found


@cache
def nodes(tree: ast.Module) -> list[ast.AST]:
    """Every node of ``tree``, walked once for all the tests that look at it (a walk of the whole
    package costs more than the checks)."""
    return list(ast.walk(tree))


@cache
def imported(tree: ast.Module) -> set[str]:
    names = set()
    for node in nodes(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


@cache
def called(tree: ast.Module) -> list[ast.Call]:
    return [node for node in nodes(tree) if isinstance(node, ast.Call)]


def name_of(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def door_calls(tree: ast.Module) -> set[str]:
    """The door's functions this module calls (``urls.checked(...)``, or ``checked`` imported from it)."""
    from_door = {
        alias.asname or alias.name
        for node in nodes(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "tfgpu.doors.urls"
        for alias in node.names
    }
    found = set()
    for call in called(tree):
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "urls":
            found.add(func.attr)
        elif isinstance(func, ast.Name) and func.id in from_door:
            found.add(func.id)
    return found & DOOR_CALLS


@pytest.fixture(scope="module")
def tree():
    yield sources()
    for walked in (nodes, imported, called):  # the package's trees are not kept past the module
        walked.cache_clear()


def test_only_the_door_splits_urls(tree):
    """``urllib.parse`` and its kin read ``http://a\\@b/`` differently from the engines: one reading, in urls.py."""
    offenders = []
    for relative, module in tree.items():
        if relative == DOOR:
            continue
        if any(name == "urllib.parse" or name.startswith("urllib.parse.") for name in imported(module)):
            offenders.append(f"{relative}: imports urllib.parse")
        offenders += [
            f"{relative}:{call.lineno}: {name_of(call)}()"
            for call in called(module)
            if name_of(call) in SPLITTERS - {"urlopen", "build_opener"}
        ]
    assert offenders == [], "URLs are read by tfgpu/doors/urls.py alone:\n" + "\n".join(offenders)


def test_only_the_tools_http_clients_open_connections(tree):
    offenders = [
        f"{relative}: {name}"
        for relative, module in tree.items()
        if relative not in set(CLIENTS) | NO_FETCH
        for name in sorted(imported(module))
        if name.startswith(NETWORK_MODULES)
    ]
    offenders += [
        f"{relative}:{call.lineno}: {name_of(call)}()"
        for relative, module in tree.items()
        if relative not in CLIENTS
        for call in called(module)
        if name_of(call) in ("urlopen", "build_opener")
    ]
    assert offenders == [], "connections are opened by " + ", ".join(CLIENTS) + " only:\n" + "\n".join(offenders)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_http_client_sends_urls_and_redirects_through_the_door(tree, client):
    module = tree[client]
    assert "tfgpu.doors.urls" in imported(module), f"{client} does not import the URL door"
    calls = door_calls(module)
    assert "checked" in calls, f"{client} never calls urls.checked on the URL it is given"
    assert "redirect" in calls, f"{client} never sends a redirect's target through urls.redirect"
    assert not [c for c in called(module) if name_of(c) == "urlopen"], (
        f"{client} calls urlopen, whose redirects bypass the door"
    )
    followers = [
        node
        for node in nodes(module)
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "attr", "") == "HTTPRedirectHandler" for base in node.bases)
    ]
    assert followers == [], f"{client}: urllib follows redirects by itself, unseen by the door"
    processors = [
        node
        for node in nodes(module)
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "attr", "") == "HTTPErrorProcessor" for base in node.bases)
    ]
    assert processors, f"{client}: urllib's own error processor would follow redirects through its handler"


@pytest.mark.parametrize("hander", HANDERS)
def test_what_reaches_an_engine_went_through_the_door(tree, hander):
    assert "checked" in door_calls(tree[hander]), f"{hander} hands URLs to an engine without urls.checked"


def test_the_transport_rule_has_no_second_entry(tree):
    """``is_secure``/``is_loopback`` were a check beside the door; only the door decides now."""
    offenders = [
        f"{relative}:{getattr(node, 'lineno', '?')}"
        for relative, module in tree.items()
        if relative != DOOR
        for node in nodes(module)
        if isinstance(node, (ast.Name, ast.Attribute, ast.alias))
        and (getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None))
        in ("is_secure", "is_loopback")
    ]
    assert offenders == [], offenders
