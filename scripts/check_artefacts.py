"""Check every external artefact the tool's advice names against its primary source, and record the answer.

    python scripts/check_artefacts.py            # query the sources, rewrite tfgpu/data/artefacts.toml
    python scripts/check_artefacts.py --list     # only list what the advice names (no network)

What is named, and where it is read from:

- the ``artefacts`` of each ``[[way_forward]]`` row in ``tfgpu/data/ptx.toml`` (an NGC container tag,
  a wheel, another framework's CUDA build);
- every ``pip install '<requirement>'`` in the tables' advice text (``log_signatures.toml`` fixes,
  ``quirks.toml``, ``ptx.toml``): a requirement is a way forward only if a release satisfies it.

Primary sources: a container tag is looked up in its registry's own tag list (the OCI distribution
API: ``GET /v2/<repository>/tags/list``, with the anonymous pull token the registry's
``WWW-Authenticate`` challenge names — nvcr.io and Docker Hub both answer this way); a requirement is
looked up in PyPI's JSON API (``https://pypi.org/pypi/<name>/json``: a release that satisfies it and
is not yanked). A source that does not answer is recorded as ``unchecked`` with the reason, never as
``exists``: the plan then says the artefact was not checked. The table is written whole, atomically.

Every answer is untrusted: requests go through the tool's one HTTP transport (the URL door for each
URL, the token realm a registry names and every redirect: HTTPS only, never a ``file:`` realm that
would hand a local file to the registry as a token; one deadline per request), documents of the
wrong shape are ``unchecked``, a tag that is not an OCI tag is ignored, and every text that reaches
the table or the terminal has its control characters escaped (the plan's schema refuses them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
import tomllib
import urllib.parse
from importlib.resources import files
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tfgpu.datasource import transport
from tfgpu.doors import controls
from tfgpu.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent
DATA = files("tfgpu.data")  # the tables as installed (the checkout's, in an editable install)
OUT = ROOT / "tfgpu" / "data" / "artefacts.toml"
PYPI = "https://pypi.org/pypi"
TIMEOUT = 20.0
"""Seconds one request may take, its redirects and its body included."""
MAX_BYTES = 64 << 20  # a tag list or a project's JSON; PyPI's largest documents are a few MB
# An OCI distribution tag (the spec's grammar): anything else a registry lists is not a tag.
_OCI_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")

# `pip install 'nvidia-cuda-nvcc-cu12>=12.6.3' tensorflow-metal==1.1.0` in advice text: each word
# after it that is a requirement with a version constraint (a bare name, an option, or a template
# field such as {compiled} is the user's own command, not an artefact).
_PIP_COMMAND = re.compile(r"pip install ([^`;)\n]*)")
_CONSTRAINED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\[\],-]*(?:===?|~=|!=|<=?|>=?)[0-9][0-9A-Za-z.*,<>=!~]*")
_ADVICE_FILES = ("ptx.toml", "log_signatures.toml", "quirks.toml")


def named() -> list[str]:
    """Every artefact the advice names, as ``registry:<host>/<repository>:<tag>`` or ``pypi:<requirement>``."""
    found: list[str] = []
    ptx = tomllib.loads(DATA.joinpath("ptx.toml").read_text(encoding="utf-8"))
    for row in ptx.get("way_forward", []):
        found.extend(row.get("artefacts", []))
    for name in _ADVICE_FILES:
        text = DATA.joinpath(name).read_text(encoding="utf-8")
        for command in _PIP_COMMAND.findall(text):
            for word in command.replace('"', " ").replace("'", " ").split():
                if _CONSTRAINED.fullmatch(word):
                    found.append(f"pypi:{word.rstrip('.,')}")
    return list(dict.fromkeys(found))


class Unanswered(Exception):
    """No usable answer; the message says why (control characters escaped)."""


def _get(
    url: str, headers: dict[str, str] | None = None, what: str = "an artefact's source"
) -> tuple[int, dict, bytes]:
    """(status, headers, body) of ``url``; the body only of a 200 answer, at most ``MAX_BYTES + 1`` bytes."""
    sent = {"User-Agent": "tfgpu-install check_artefacts", **(headers or {})}
    try:
        with transport.request(url, what, headers=sent, timeout=TIMEOUT, deadline=time.monotonic() + TIMEOUT) as answer:
            body = answer.read(MAX_BYTES + 1) if answer.status == 200 else b""
            return answer.status, dict(answer.headers), body
    except transport.Failure as failure:
        raise Unanswered(failure.problem) from None
    except UsageError as error:  # the URL door refused it (or a redirect's target)
        raise Unanswered(error.message) from None


def _document(body: bytes, shape: type):
    """``body`` as JSON of ``shape``; :class:`Unanswered` otherwise."""
    if len(body) > MAX_BYTES:
        raise Unanswered(f"an answer larger than {MAX_BYTES} bytes")
    try:
        document = json.loads(body)
    except ValueError:
        raise Unanswered("an answer that is not JSON") from None
    if not isinstance(document, shape):
        raise Unanswered(f"a JSON answer that is not {'an object' if shape is dict else 'a list'}")
    return document


def _challenge(header: str) -> dict[str, str]:
    """The fields of a ``WWW-Authenticate: Bearer realm="…",service="…",scope="…"`` challenge."""
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def check_registry(name: str, scheme: str = "https") -> dict[str, str]:
    """``registry:<host>/<repository>:<tag>`` against the registry's tag list."""
    reference = name.removeprefix("registry:")
    host, _, rest = reference.partition("/")
    repository, _, tag = rest.rpartition(":")
    url = f"{scheme}://{host}/v2/{repository}/tags/list"
    row = {"name": name, "kind": "registry", "url": url}
    try:
        status, headers, body = _get(url)
        if status == 401:
            fields = _challenge(headers.get("WWW-Authenticate", headers.get("Www-Authenticate", "")))
            if not fields.get("realm"):
                return {**row, "result": "unchecked", "detail": "the registry asked for credentials it did not name"}
            query = urllib.parse.urlencode({k: v for k, v in fields.items() if k in ("service", "scope")})
            _, _, token_body = _get(f"{fields['realm']}?{query}", what="the registry's token realm")
            token = _document(token_body or b"{}", dict)
            bearer = token.get("token") or token.get("access_token")
            if not isinstance(bearer, str) or not bearer or not bearer.isascii() or not bearer.isprintable():
                return {**row, "result": "unchecked", "detail": "the registry gave no anonymous pull token"}
            status, headers, body = _get(url, {"Authorization": f"Bearer {bearer}"})
        if status != 200:
            return {**row, "result": "unchecked", "detail": f"the tag list answered HTTP {status}"}
        tags = _document(body, dict).get("tags") or []
        if not isinstance(tags, list):
            raise Unanswered("a tag list whose tags are not a list")
    except Unanswered as error:
        return {**row, "result": "unchecked", "detail": _plain(f"{url} gave no answer ({error})")}
    tags = [t for t in tags if isinstance(t, str) and _OCI_TAG.fullmatch(t)]
    suffix = tag.split("-", 1)[1] if "-" in tag else ""
    line = sorted((t for t in tags if suffix and t.endswith("-" + suffix)), key=_tag_key)
    newest = f"; the newest -{suffix} tag: {line[-1]}" if line else ""
    if tag in tags:
        return {**row, "result": "exists", "detail": _plain(f"{tag} is listed{newest}")}
    return {**row, "result": "missing", "detail": _plain(f"{tag} is not listed{newest}")}


def _plain(text: str) -> str:
    """``text`` on one line, its control characters escaped: it reaches a terminal and the table."""
    return controls.shown(text)


def _tag_key(tag: str) -> tuple[int, ...]:
    # A tag is at most 128 characters, so each number has fewer digits than int() refuses.
    return tuple(int(part) for part in re.findall(r"\d+", tag.split("-", 1)[0]))


def check_pypi(name: str, index: str = PYPI) -> dict[str, str]:
    """``pypi:<requirement>`` against the project's releases on the index (not yanked)."""
    text = name.removeprefix("pypi:")
    try:
        requirement = Requirement(text)
    except InvalidRequirement as error:
        return {
            "name": name,
            "kind": "pypi",
            "url": index,
            "result": "unchecked",
            "detail": f"not a requirement: {error}",
        }
    url = f"{index}/{canonicalize_name(requirement.name)}/json"
    row = {"name": name, "kind": "pypi", "url": url}
    try:
        status, _, body = _get(url)
        if status == 404:
            return {**row, "result": "missing", "detail": f"{requirement.name} is not on the index"}
        if status != 200:
            return {**row, "result": "unchecked", "detail": f"the index answered HTTP {status}"}
        document = _document(body, dict)
        releases, info = document.get("releases") or {}, document.get("info") or {}
        extras = info.get("provides_extra") or [] if isinstance(info, dict) else None
        if not isinstance(releases, dict) or not isinstance(extras, list):
            raise Unanswered("a project document of the wrong shape")
    except Unanswered as error:
        return {**row, "result": "unchecked", "detail": _plain(f"{url} gave no answer ({error})")}
    versions = []
    for version, uploads in releases.items():
        try:
            parsed = Version(version)
        except InvalidVersion:
            continue
        if not isinstance(uploads, list) or not all(isinstance(f, dict) for f in uploads):
            continue  # a release listed without its files is not one that can be installed
        if uploads and not all(f.get("yanked") for f in uploads) and requirement.specifier.contains(parsed):
            versions.append(parsed)
    if not versions:
        return {
            **row,
            "result": "missing",
            "detail": f"no release of {requirement.name} satisfies {requirement.specifier}",
        }
    # The extras of the newest release (the JSON document describes it): `jax[cuda12]` is a way
    # forward only while jax still offers that extra.
    offered = {canonicalize_name(extra) for extra in extras if isinstance(extra, str)}
    lacking = sorted(extra for extra in requirement.extras if canonicalize_name(extra) not in offered)
    if lacking:
        return {
            **row,
            "result": "missing",
            "detail": f"{requirement.name}'s newest release offers no extra {lacking[0]}",
        }
    count = f"{len(versions)} releases satisfy it" if len(versions) > 1 else "1 release satisfies it"
    return {**row, "result": "exists", "detail": f"{count}; the newest: {max(versions)}"}


def check(name: str) -> dict[str, str]:
    if name.startswith("registry:"):
        return check_registry(name)
    if name.startswith("pypi:"):
        return check_pypi(name)
    return {"name": name, "kind": "unknown", "url": "", "result": "unchecked", "detail": "no checker for this kind"}


def line(row: dict[str, str]) -> str:
    """What the script prints for ``row``."""
    return _plain(f"{row['result']:9}  {row['name']}  ({row['detail']})")


def _quoted(value: str) -> str:
    # TOML's basic string: JSON's escapes, and every control character escaped (JSON leaves DEL and
    # the C1 controls as they are, which TOML refuses and a terminal obeys).
    return json.dumps(_plain(value), ensure_ascii=False)


def render(rows: list[dict[str, str]], checked: str) -> str:
    lines = [
        "# The external artefacts the tool's advice names, checked against their primary sources.",
        "# Generated by `python scripts/check_artefacts.py` (do not edit by hand): a container tag against its",
        "# registry's tag list (OCI distribution API), a requirement against PyPI's JSON API. result: exists,",
        "# missing (the source answered and does not have it) or unchecked (the source did not answer; detail",
        "# says why). The plan says which of its ways forward were checked, and drops a missing one.",
        "",
        f"generated = {_quoted(checked)}",
    ]
    for row in rows:
        lines += ["", "[[artefact]]"]
        lines += [f"{key} = {_quoted(row[key])}" for key in ("name", "kind", "url", "result", "detail")]
        lines.append(f"checked = {_quoted(checked)}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="only list what the advice names")
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    args = parser.parse_args(argv)
    names = named()
    if args.list:
        print("\n".join(names))
        return 0
    rows = [check(name) for name in names]
    for row in rows:
        print(line(row))
    staged = args.output.with_name(args.output.name + ".tmp")
    staged.write_text(render(rows, datetime.date.today().isoformat()), encoding="utf-8")
    staged.replace(args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
