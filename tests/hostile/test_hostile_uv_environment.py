"""The environment's uv index variables on create pass the URL door like ``TFGPU_INDEX_URL``
(``tfgpu/process/runner.py`` checks every index variable a child would read)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("variable", ["UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL"])
def test_a_plain_http_index_from_uvs_environment_is_refused_like_tfgpu_index_url(cli, sandbox, local_wheels, variable):
    """TFGPU_INDEX_URL=http://127.0.0.2:9/simple is ``insecure-url`` (no --insecure-host names it);
    the same URL in UV_INDEX_URL is handed to `uv pip compile` on create, which fetches over plain
    HTTP from a host nobody named. (A closed loopback port: nothing real is reached.)"""
    url = "http://127.0.0.2:9/simple"
    done = cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--prefix",
        str(sandbox / "E"),
        "--find-links",
        str(local_wheels),
        "--no-verify",
        "--no-detect",
        "--json",
        env={variable: url},
    )
    logged = "".join(p.read_text(errors="replace") for p in (sandbox / "logs").rglob("*") if p.is_file())
    assert done.error == "insecure-url" or "127.0.0.2:9" not in logged, done.out[:800]
