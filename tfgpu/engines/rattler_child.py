"""The process where py-rattler's asynchronous work runs: solve, query the channels' index,
install, index a channel directory.

py-rattler runs that work on native (tokio) threads that can outlive the Python interpreter: a
failed fetch leaves tasks behind which, at interpreter exit, take the GIL from a finalising
runtime and abort the process (SIGABRT or SIGSEGV after the error was printed). So the tool never
runs them in its own process. ``tfgpu.engines.rattler_engine`` starts this module through the one door for
child processes (``tfgpu.process.runner.Runner``) with one request as JSON on stdin; this process says what it
attempts (the runner's log keeps it), prints progress and the error text on stdout, writes its
answer as JSON to the file the request names, and ends with ``os._exit`` — so it never finalises
with native threads still running, and a crash here is the engine's, reported as such, never the
tool's.

Answer: ``{"records": [...]}`` (repodata records as JSON) or ``{"error": {"kind", "text"}}`` with
kind ``unsolvable`` (the solver's own explanation) or ``failed`` (network, cache, disk).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.engines.rattler_wire import BYTES, PROGRESS


def _say(text: str) -> None:
    sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


def _client():
    """rattler's client with its own authentication: a channel's credential comes from
    ``RATTLER_AUTH_FILE``, ``~/.rattler/credentials.json`` or the keyring (a ``CondaToken`` puts
    ``/t/<token>/`` back into every request), never from the URL a lock records (``tfgpu.doors.secrets``)."""
    from rattler import Client
    from rattler.networking.middleware import AuthenticationMiddleware

    return Client([AuthenticationMiddleware()])


def _gateway(repodata_cache: str, offline: bool):
    from rattler import Gateway, SourceConfig

    config = SourceConfig(cache_action="force-cache-only" if offline else "cache-or-fetch")
    return Gateway(cache_dir=Path(repodata_cache), default_config=config, client=_client())


def _solve(request: dict, scratch: Path) -> list:
    from rattler import Channel, solve

    from tfgpu.engines.rattler_wire import records_from_json, virtual_packages

    virtual = virtual_packages(request["platform"], request["cuda"], this_host=request["this_host"])
    pinned = records_from_json(request.get("pinned") or [], scratch)
    return asyncio.run(
        solve(
            [Channel(url) for url in request["channels"]],
            request["specs"],
            gateway=_gateway(request["repodata_cache"], request["offline"]),
            platforms=[request["platform"], "noarch"],
            virtual_packages=virtual,
            channel_relations="disabled",
            pinned_packages=pinned or None,
        )
    )


def _query(request: dict, scratch: Path) -> list:
    from rattler import Channel

    gateway = _gateway(request["repodata_cache"], request["offline"])
    found = asyncio.run(
        gateway.query(
            [Channel(url) for url in request["channels"]], request["platforms"], request["names"], recursive=False
        )
    )
    return [record for records in found for record in records]


def _install(request: dict, scratch: Path) -> list:
    from rattler import install

    from tfgpu.engines.rattler_wire import records_from_json

    records = records_from_json(request["records"], scratch)
    keep = set(request["keep"]) if request.get("keep") is not None else None
    asyncio.run(
        install(
            records,
            target_prefix=Path(request["staging"]),
            alternative_target_prefix=Path(request["final"]),
            cache_dir=Path(request["package_cache"]),
            show_progress=False,
            client=_client(),
            reporter=_Progress(len(records)),
            execute_link_scripts=False,
            ignored_packages=keep,
        )
    )
    return []


def _index(request: dict, scratch: Path) -> list:
    from rattler.index import index_fs

    asyncio.run(index_fs(Path(request["channel"]), force=True))
    return []


OPERATIONS = {"solve": _solve, "query": _query, "install": _install, "index": _index}


class _Progress:
    """rattler's installer callbacks: a line per linked package, and the bytes of the package
    downloads (at most every :data:`EVERY` seconds, and when one completes) for the tool's bar."""

    EVERY = 0.2

    def __init__(self, total: int) -> None:
        self.total = total
        self.linked = 0
        self.downloads: list[list] = []
        """``[done, total or None]`` of every download started."""
        self.said = 0.0

    def on_transaction_start(self, total_operations: int) -> None:
        self.total = total_operations

    def on_download_start(self, cache_entry: int) -> int:
        self.downloads.append([0, None])
        return len(self.downloads) - 1

    def on_download_progress(self, download_idx: int, progress: int, total: int | None) -> None:
        self.downloads[download_idx] = [progress, total]
        self._bytes(force=False)

    def on_download_completed(self, download_idx: int) -> None:
        done, total = self.downloads[download_idx]
        self.downloads[download_idx] = [total or done, total or done]
        self._bytes(force=True)

    def _bytes(self, *, force: bool) -> None:
        import time

        now = time.monotonic()
        if not force and now - self.said < self.EVERY:
            return
        self.said = now
        done = sum(entry[0] for entry in self.downloads)
        totals = [entry[1] for entry in self.downloads]
        total = str(sum(totals)) if all(t is not None for t in totals) else "-"
        _say(f"{PROGRESS}{BYTES}{done} {total}")

    def on_link_complete(self, index: int) -> None:
        self.linked += 1
        _say(f"{PROGRESS}linked {self.linked}/{self.total} packages")

    def __getattr__(self, name: str):  # every other callback: nothing to report
        if name.startswith("on_"):
            return lambda *args, **kwargs: 0
        raise AttributeError(name)


def _answer(request: dict) -> dict:
    import tempfile

    from rattler.exceptions import SolverError

    _say(f"rattler {request['op']}: {request.get('what', '')}")
    try:
        with tempfile.TemporaryDirectory(prefix="tfgpu-rattler-") as scratch:
            records = OPERATIONS[request["op"]](request, Path(scratch))
    except SolverError as error:
        _say(f"error (unsolvable): {error}")
        return {"error": {"kind": "unsolvable", "text": str(error)}}
    except Exception as error:  # noqa: BLE001 - rattler's network/cache/link errors share no base class
        _say(f"error: {type(error).__name__}: {error}")
        return {"error": {"kind": "failed", "text": str(error) or type(error).__name__}}
    _say(f"done: {len(records)} records" if records else "done")
    return {
        "records": [
            untrusted.parse_json(record.to_json(), untrusted.CHILD_OUTPUT, "a solved record") for record in records
        ]
    }


def main() -> None:
    code = 0
    try:
        request = untrusted.parse_json(
            untrusted.read_stream(sys.stdin.buffer, untrusted.CHILD_OUTPUT, untrusted.CHILD_OUTPUT.limit),
            untrusted.CHILD_OUTPUT,
            "the request",
        )
        answer = _answer(request)
        partial = f"{request['result']}.part"
        with open(partial, "w", encoding="utf-8") as handle:
            json.dump(answer, handle)
        trees.replace(partial, request["result"])
    except KeyboardInterrupt:
        code = 130
    except BaseException as error:  # noqa: BLE001 - anything here is reported by the missing answer
        _say(f"error: {type(error).__name__}: {error}")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # never finalise while rattler's native threads may still run


if __name__ == "__main__":
    main()
