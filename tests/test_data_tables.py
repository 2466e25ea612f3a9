"""Structural invariants of the compatibility tables in tfgpu/data/.

Covers sources.toml, cuda.toml, conda_forge.toml (+ the generated conda_cudnn.toml), metal.toml
(+ the generated macos_wheels.toml), windows.toml and ptx.toml: they parse,
every row/table cites sources that exist, and the values have the shapes the resolver
relies on. The facts themselves come from the shared compat-facts reference.
"""

from __future__ import annotations

import re
import tomllib
from importlib.resources import files

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

DATA = files("tfgpu.data")  # the installed package's data, so the wheel test checks what ships
TABLES = [
    "cuda.toml",
    "conda_forge.toml",
    "conda_cudnn.toml",
    "metal.toml",
    "macos_wheels.toml",
    "windows.toml",
    "ptx.toml",
    "gpu_peaks.toml",
]
ALL_FILES = ["sources.toml", *TABLES]

DOTTED = re.compile(r"^\d+(\.\d+)*$")
# "unverified" entries that do not name a field of the row (documented in the files).
UNVERIFIED_PSEUDO_FIELDS = {"uploaded"}


def load(name: str) -> dict:
    with DATA.joinpath(name).open("rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="module")
def sources() -> dict:
    return load("sources.toml")["sources"]


def iter_rows(doc: dict, path: str = ""):
    """Yield (path, table) for every table (including array-of-tables rows) in doc."""
    for key, value in doc.items():
        here = f"{path}.{key}" if path else key
        if isinstance(value, dict):
            yield here, value
            yield from iter_rows(value, here)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, row in enumerate(value):
                yield f"{here}[{i}]", row
                yield from iter_rows(row, f"{here}[{i}]")


def is_dotted(s: str) -> bool:
    return bool(DOTTED.match(s))


@pytest.mark.parametrize("name", ALL_FILES)
def test_parses(name):
    doc = load(name)
    assert doc, f"{name} is empty"


def test_sources_entries(sources):
    assert sources
    for key, entry in sources.items():
        assert isinstance(entry.get("title"), str) and entry["title"].strip(), key
        assert isinstance(entry.get("url"), str), key
        urls = [entry["url"], *entry.get("extra_urls", [])]
        for url in urls:
            assert url == "" or url.startswith("https://"), (key, url)
        if entry.get("extra_urls"):
            assert entry["url"], f"{key}: extra_urls without url"


@pytest.mark.parametrize("name", TABLES)
def test_every_row_has_known_sources(name, sources):
    doc = load(name)
    # every top-level table, and every row of every array of tables, carries source
    for key, value in doc.items():
        if key == "generated":  # the date a generated table was written
            continue
        rows = value if isinstance(value, list) else [value]
        for i, row in enumerate(rows):
            assert isinstance(row, dict), (name, key)
            assert "source" in row, f"{name}: {key}[{i}] has no source"
    # and any table that has a source has a valid one
    for path, row in iter_rows(doc):
        if "source" not in row:
            continue
        src = row["source"]
        assert isinstance(src, list) and src, f"{name}: {path} source empty"
        missing = [k for k in src if k not in sources]
        assert not missing, f"{name}: {path} cites unknown sources {missing}"
        assert len(set(src)) == len(src), f"{name}: {path} duplicate source keys"


@pytest.mark.parametrize("name", TABLES)
def test_unverified_names_fields(name):
    doc = load(name)
    for path, row in iter_rows(doc):
        if "unverified" not in row:
            continue
        unv = row["unverified"]
        assert isinstance(unv, list), path
        for field in unv:
            assert field in row or field in UNVERIFIED_PSEUDO_FIELDS, (name, path, field)


# --- cuda.toml -------------------------------------------------------------------------


def test_toolkit_versions_unique_sorted():
    rows = load("cuda.toml")["toolkit"]
    versions = [Version(r["version"]) for r in rows]
    assert len(set(versions)) == len(versions), "duplicate toolkit versions"
    assert versions == sorted(versions), "toolkit rows not in ascending order"


def test_toolkit_driver_values():
    for r in load("cuda.toml")["toolkit"]:
        v = r["version"]
        for field in ("linux", "windows", "bundled_driver"):
            val = r[field]
            if val:
                assert is_dotted(val), (v, field, val)
            elif field == "linux":
                # an absent Linux minimum must be flagged
                assert "linux" in r["unverified"], v
        if r["md5"]:
            assert re.fullmatch(r"[0-9a-f]{32}", r["md5"]), v
        if r["sha256"]:
            assert re.fullmatch(r"[0-9a-f]{64}", r["sha256"]), v
        if r["runfile"]:
            assert r["runfile"].startswith(f"cuda_{v}_"), v
            assert r["runfile_url"].endswith("/" + r["runfile"]), v
            assert r["bundled_driver"] and r["bundled_driver"] in r["runfile"], v
        else:
            assert not r["runfile_url"], v
            assert "runfile" in r["unverified"], v
        for url in (r["runfile_url"], r["md5_url"]):
            assert url == "" or url.startswith("https://"), (v, url)


def test_linux_drivers_parse_everywhere():
    doc = load("cuda.toml")
    for r in doc["toolkit"]:
        if r["linux"]:
            tuple(int(p) for p in r["linux"].split("."))
    for r in doc["mvc"]:
        if r["linux"]:
            tuple(int(p) for p in r["linux"].split("."))
    assert is_dotted(doc["wsl2"]["min_driver"])


def test_mvc_floors():
    rows = {r["cuda_major"]: r for r in load("cuda.toml")["mvc"]}
    for major in (11, 12):
        assert major in rows, f"no MVC floor for CUDA {major}"
        r = rows[major]
        assert r["mvc"] is True
        assert is_dotted(r["linux"]) and is_dotted(r["windows"]), major
        assert "linux" not in r["unverified"]
    assert rows[10]["mvc"] is False
    # floors ascend with the major and sit below the next major's branch
    floors = [tuple(map(int, rows[m]["linux"].split("."))) for m in (11, 12)]
    assert floors == sorted(floors)
    assert int(rows[11]["below_driver"]) <= floors[1][0]


def test_toolkit_minimums_vs_mvc():
    """Every 11.x/12.x toolkit's own minimum is at or above its major's MVC branch."""
    doc = load("cuda.toml")
    mvc = {r["cuda_major"]: r for r in doc["mvc"]}
    for r in doc["toolkit"]:
        major = int(r["version"].split(".")[0])
        if major in (11, 12) and r["linux"]:
            assert int(r["linux"].split(".")[0]) >= int(mvc[major]["branch"]), r["version"]


def test_arch_tables():
    doc = load("cuda.toml")
    for r in doc["arch_support"]:
        Version(r["cuda_from"])
        assert r["dropped"], r
    for r in doc["arch_min_cuda"]:
        Version(r["cc"])
        Version(r["cuda"])


# --- conda_forge.toml ------------------------------------------------------------------


def test_conda_forge_versions():
    doc = load("conda_forge.toml")
    ctk = doc["cudatoolkit"]["versions"]
    cv = doc["cuda_version"]["versions"]
    for seq in (ctk, cv):
        parsed = [Version(v) for v in seq]
        assert parsed == sorted(parsed) and len(set(parsed)) == len(parsed)
    assert ctk[-1] == "11.8"
    assert set(ctk) <= set(cv)
    for mm, full in doc["cudatoolkit"]["exact"].items():
        assert mm in ctk and full.startswith(mm + "."), (mm, full)
    assert not set(doc["cuda_version"]["unverified_versions"]) & set(cv)
    rows = load("conda_cudnn.toml")["cudnn"]
    cudnn = [Version(r["version"]) for r in rows]
    assert cudnn == sorted(cudnn) and len(set(cudnn)) == len(cudnn)
    for r in rows:  # every version has its variants and the CUDA ranges its builds install with
        assert r["cuda"] and r["runs_with"], r["version"]
        for spec in r["runs_with"]:
            assert any(Version(v) in SpecifierSet(spec) for v in r["cuda"]), (r["version"], spec)
        assert r["first"] and r["last"] and r["source"] == ["CF-CUDNN"]
    seen = []
    for r in doc["tensorflow"]:
        assert r["versions"] and r["cuda"]
        for v in r["versions"]:
            Version(v)
            assert v not in seen, f"tensorflow {v} listed twice"
            seen.append(v)


# --- metal.toml ------------------------------------------------------------------------


def test_metal_specifiers():
    rows = load("metal.toml")["metal"]
    specs = []
    for r in rows:
        spec = SpecifierSet(r["tensorflow"])
        Version(r["metal"])
        Version(r["macos"])
        assert r["package"] in ("tensorflow", "tensorflow-macos")
        assert "python" not in r and "x86_64" not in r  # those come from the wheels (macos_wheels.toml)
        specs.append(spec)
    # rows do not overlap: each TF minor maps to at most one metal version
    for minor in range(0, 30):
        tf = Version(f"2.{minor}.0")
        hits = [r["metal"] for r, s in zip(rows, specs, strict=True) if tf in s]
        assert len(hits) <= 1, (str(tf), hits)


# --- windows.toml ----------------------------------------------------------------------


def test_windows_releases():
    doc = load("windows.toml")
    series = [Version(r["series"]) for r in doc["release"]]
    assert series == sorted(series) and len(set(series)) == len(series)
    assert doc["native_gpu"]["last_release"] == doc["release"][-1]["series"]
    for r in doc["release"]:
        assert r["python"] and all(is_dotted(p) for p in r["python"])
        assert is_dotted(r["cuda"]) and is_dotted(r["cudnn"])


def test_every_metal_pin_is_a_version_pypi_has():
    wheels = {(r["project"], r["version"]): r for r in load("macos_wheels.toml")["wheels"]}
    for r in load("metal.toml")["metal"]:
        row = wheels[("tensorflow-metal", r["metal"])]
        assert row["macos_arm64"], r["metal"]


# --- ptx.toml ----------------------------------------------------------------------------------


def test_ptx_targets():
    doc = load("ptx.toml")
    ccs = [Version(r["cc"]) for r in doc["target"]]
    assert ccs == sorted(ccs)
    for r in doc["target"]:
        # Blackwell targets need PTX ISA 8.6+; the Hopper control (sm_90) came with 7.8.
        assert Version(r["min_ptx_isa"]) >= Version("8.6" if r["family"] == "Blackwell" else "7.8"), r["cc"]
    for cuda, isa in doc["xla"]["cuda_to_ptx_isa"].items():
        Version(cuda), Version(isa)
    for r in doc["jit_report"]:
        SpecifierSet(r["tensorflow"]), SpecifierSet(r["cc"])
        assert all(Version(v) in SpecifierSet(r["tensorflow"]) or v.count(".") == 1 for v in r["reported"])


def test_wsl2_driver_floors_per_cuda_major():
    rows = {r["cuda_major"]: r for r in load("cuda.toml")["wsl2_driver"]}
    assert set(rows) == {11, 12}
    for r in rows.values():
        assert is_dotted(r["min_driver"]) and r["source"]


# -- the full schema over every shipped table ------------------------------------------------
# A command reads the shipped tables back from the parsed-data cache (only a cache no one else can
# write); the full validation (versions, specifiers, patterns, requirements) of what ships is here.


def shipped() -> list[str]:
    return sorted(entry.name for entry in DATA.iterdir() if entry.name.endswith(".toml"))


@pytest.mark.parametrize("name", shipped())
def test_every_shipped_table_passes_its_full_schema(name):
    from tfgpu.data import parse, schema

    assert name in schema.SCHEMAS, f"{name} ships without a schema"
    table = parse(name, DATA.joinpath(name).read_bytes(), f"tfgpu/data/{name}")  # bad-data if it breaks it
    assert isinstance(table, dict) and table


def test_the_table_list_read_from_disk_is_the_packages():
    """``tfgpu.data`` lists its directory instead of asking importlib.resources (a start-up cost);
    the two must name the same tables."""
    from tfgpu.data import shipped_names

    assert shipped_names() == shipped()
