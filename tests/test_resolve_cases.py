"""Run every case of tests/cases/resolve.toml through the resolver (no host detection)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tfgpu.errors import ImpossibleError
from tfgpu.resolver import make_request, resolve

CASES = tomllib.loads((Path(__file__).parent / "cases" / "resolve.toml").read_text())["case"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    request = make_request(**case["request"])
    if "error" in case:
        with pytest.raises(ImpossibleError) as caught:
            resolve(request, None)
        assert caught.value.code == case["error"], caught.value.message
        assert caught.value.alternatives, "every impossible request names a way forward"
        return
    plan = resolve(request, None).to_dict()
    for key, value in case.get("expect", {}).items():
        assert plan[key] == (None if value == "__none__" else value), key
    packages = plan["packages"]
    warning_codes = {w["code"] for w in plan["warnings"]}
    rejected = {r["tensorflow"] for r in plan["rejected"]}
    for kind in ("pip", "conda", "cuda_extra"):
        for item in case.get(f"{kind}_contains", []):
            assert item in packages[kind], (item, packages[kind])
        for prefix in case.get(f"{kind}_excludes_prefix", []):
            assert not [p for p in packages[kind] if p.startswith(prefix)], (prefix, packages[kind])
    for text in case.get("downloads_contain_substring", []):
        assert any(text in d for d in packages["downloads"]), packages["downloads"]
    assert set(case.get("warnings_contain", [])) <= warning_codes, warning_codes
    assert not set(case.get("warnings_exclude", [])) & warning_codes, warning_codes
    assert set(case.get("rejected_contains", [])) <= rejected, rejected
