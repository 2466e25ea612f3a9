"""The external artefacts the advice names (an NGC tag, a wheel, another framework's build) are checked
against their primary sources by ``scripts/check_artefacts.py``, and the plan says what was found.

The registry and the index here are real HTTP servers on loopback speaking the protocols of the real
ones (the OCI distribution API with an anonymous-token challenge, as nvcr.io and Docker Hub answer;
PyPI's JSON API): NVIDIA's and PyPI's servers themselves are the boundary that cannot run here.
"""

from __future__ import annotations

import json
import threading
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files

import pytest
import scriptmodule

from tfgpu.resolver import archtruth, tables

check_artefacts = scriptmodule.load("check_artefacts")


def test_every_artefact_the_advice_names_has_a_recorded_check():
    recorded = tomllib.loads(files("tfgpu.data").joinpath("artefacts.toml").read_text(encoding="utf-8"))
    names = {row["name"] for row in recorded["artefact"]}
    missing = [name for name in check_artefacts.named() if name not in names]
    assert missing == [], f"run `python scripts/check_artefacts.py`: {missing} named but never checked"
    assert any(name.startswith("registry:nvcr.io/nvidia/tensorflow:") for name in names)


def test_the_advice_text_yields_only_constrained_requirements():
    found = check_artefacts.named()
    assert "pypi:nvidia-cuda-nvcc-cu12>=12.6.3" in found
    assert not [name for name in found if "{" in name or name.endswith((".", ","))]


class _Registry(BaseHTTPRequestHandler):
    """``/v2/<repo>/tags/list`` behind a Bearer challenge; ``/token`` hands out an anonymous token."""

    tags: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's hook
        host = f"http://{self.server.server_address[0]}:{self.server.server_address[1]}"
        if self.path.startswith("/token?"):
            return self._send(200, {"token": "anonymous-pull"})
        if self.path == "/v2/nvidia/tensorflow/tags/list":
            if self.headers.get("Authorization") != "Bearer anonymous-pull":
                self.send_response(401)
                self.send_header(
                    "WWW-Authenticate",
                    f'Bearer realm="{host}/token",service="registry",scope="repository:nvidia/tensorflow:pull"',
                )
                self.end_headers()
                return None
            return self._send(200, {"name": "nvidia/tensorflow", "tags": self.tags})
        return self._send(404, {})

    def _send(self, code, document):
        body = json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def registry():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_tag_the_registry_lists_is_found_with_the_newest_of_its_line(registry, monkeypatch):
    monkeypatch.setattr(_Registry, "tags", ["24.12-tf2-py3", "25.02-tf2-py3", "25.01-tf2-py3", "23.03-tf1-py3"])
    row = check_artefacts.check_registry(f"registry:{registry}/nvidia/tensorflow:25.02-tf2-py3", scheme="http")
    assert row["result"] == "exists"
    assert "the newest -tf2-py3 tag: 25.02-tf2-py3" in row["detail"]


def test_a_tag_the_registry_does_not_list_is_missing_and_names_the_newest(registry, monkeypatch):
    monkeypatch.setattr(_Registry, "tags", ["24.12-tf2-py3", "25.02-tf2-py3"])
    row = check_artefacts.check_registry(f"registry:{registry}/nvidia/tensorflow:25.03-tf2-py3", scheme="http")
    assert row["result"] == "missing"
    assert row["detail"] == "25.03-tf2-py3 is not listed; the newest -tf2-py3 tag: 25.02-tf2-py3"


def test_a_registry_that_does_not_answer_is_unchecked_never_found():
    row = check_artefacts.check_registry("registry:127.0.0.1:9/nvidia/tensorflow:25.02-tf2-py3", scheme="http")
    assert row["result"] == "unchecked"


class _Index(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        projects = {
            "/pypi/jax/json": {
                "info": {"provides_extra": ["cuda12", "cuda13"]},
                "releases": {"0.5.0": [{"yanked": False}], "0.6.0": [{"yanked": True}]},
            },
        }
        document = projects.get(self.path)
        body = json.dumps(document or {}).encode()
        self.send_response(200 if document else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def index():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("requirement", "result"),
    [
        ("jax[cuda12]", "exists"),
        ("jax[cuda12]>=0.6", "missing"),  # the only such release is yanked
        ("jax[cuda11]", "missing"),  # an extra the project no longer offers
        ("nosuchproject==1", "missing"),
    ],
)
def test_a_requirement_exists_only_where_an_unyanked_release_and_the_extra_do(index, requirement, result):
    assert check_artefacts.check_pypi(f"pypi:{requirement}", index=index)["result"] == result


def _with_artefacts(monkeypatch, result: str, detail: str) -> None:
    real = tables.load_toml

    def load(name):
        document = real(name)
        if name == "artefacts.toml":
            rows = [
                {**row, "result": result, "detail": detail} if row["name"].startswith("registry:nvcr.io") else row
                for row in document["artefact"]
            ]
            return {**document, "artefact": rows}
        return document

    monkeypatch.setattr(tables, "load_toml", load)


def _container_way(release_version: str = "2.20.0") -> list[str]:
    release = next(r for r in tables.releases() if str(r.version) == release_version)
    return [way for way in archtruth.ways_forward(release, "12.0") if "NGC TensorFlow container" in way]


def test_the_plan_says_a_container_tag_was_not_confirmed_when_its_registry_did_not_answer(monkeypatch):
    _with_artefacts(monkeypatch, "unchecked", "https://nvcr.io/v2/nvidia/tensorflow/tags/list gave no answer")
    (way,) = _container_way()
    assert "not confirmed, the source did not answer" in way


def test_the_plan_drops_a_container_way_forward_whose_tags_are_gone(monkeypatch):
    _with_artefacts(monkeypatch, "missing", "not listed; the newest -tf2-py3 tag: 25.02-tf2-py3")
    assert _container_way() == []


def test_the_plan_names_what_the_registry_lists(monkeypatch):
    _with_artefacts(monkeypatch, "exists", "listed; the newest -tf2-py3 tag: 25.09-tf2-py3")
    (way,) = _container_way()
    assert "found (listed; the newest -tf2-py3 tag: 25.09-tf2-py3)" in way


@pytest.mark.network
def test_every_wheel_the_advice_names_is_on_pypi_today():
    rows = [check_artefacts.check_pypi(name) for name in check_artefacts.named() if name.startswith("pypi:")]
    assert rows and [row for row in rows if row["result"] != "exists"] == []
