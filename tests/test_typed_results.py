"""Results and requests that cross a room's boundary are typed records, not dicts: held for the rooms
whose results are typed (the resolver, the cache) by the count ``scripts/house_counts.py`` makes
from the source, and for the results converted elsewhere by name. A dict that is data by nature (a
parsed table, a mapping of names to values) stays a dict, each named below with why."""

from __future__ import annotations

import functools
from pathlib import Path

import scriptmodule

import tfgpu
from tfgpu.records import is_record

DATA_BY_NATURE = {
    "tfgpu/cache/survey.py:unpacked_twice": "wheel name -> bytes of its extra copies",
    "tfgpu/resolver/companions.py:versions": "distribution name -> its published versions",
    "tfgpu/resolver/newgpu.py:ptx_table": "the parsed ptx.toml document",
    "tfgpu/resolver/tables.py:load_toml": "a parsed data table",
    "tfgpu/resolver/tables.py:series": "TensorFlow series -> its tested configuration",
}
"""The public functions of the typed rooms that return a dict, and why that dict is data."""

TYPED_ROOMS = ("tfgpu/resolver/", "tfgpu/cache/")

TYPED_ELSEWHERE = (
    "tfgpu/datasource/update.py:update_data",
    "tfgpu/envs/txn.py:remove",
    "tfgpu/export/dockerfile.py:choose_image",
    "tfgpu/lock/__init__.py:check_project",
    "tfgpu/lock/conda/write.py:summary",
)


@functools.cache  # one count of the whole package for the file's tests, which only read it
def _public_dict_returning() -> tuple[str, ...]:
    module = scriptmodule.load("house_counts")
    # The package under test: the checkout's, or the installed wheel's when the tests run outside it.
    return tuple(module.counts(Path(tfgpu.__file__).parent)["public_dict_returning"])


def test_the_resolver_and_the_cache_return_dicts_only_where_the_dict_is_data():
    found = {name for name in _public_dict_returning() if name.startswith(TYPED_ROOMS)}
    assert found == set(DATA_BY_NATURE), (
        "a public function of the resolver or the cache returns a dict: return a @record "
        "(with to_dict() where it ends in --json), or name it in DATA_BY_NATURE with why"
    )


def test_results_typed_elsewhere_stay_typed():
    found = set(_public_dict_returning())
    assert not found & set(TYPED_ELSEWHERE)


def test_matrix_data_status_is_a_record_whose_document_keeps_its_keys():
    from tfgpu.resolver.overlay import data_status

    status = data_status()
    assert is_record(status)
    assert list(status.to_dict()) == [
        "shipped_generated",
        "updated",
        "updated_from",
        "update_releases",
        "newest",
        "newest_final",
    ]
    assert status.newest and status.shipped_generated


def test_cuda_facts_are_typed_per_cuda_major():
    from tfgpu.data import load
    from tfgpu.resolver.tables import cuda_facts

    facts = cuda_facts()
    rows = load("cuda.toml")["wsl2_driver"]
    assert sorted(facts.wsl2_driver) == sorted(row["cuda_major"] for row in rows)
    for row in rows:
        typed = facts.wsl2_driver[row["cuda_major"]]
        assert (typed.min_driver, typed.docs_cover) == (row["min_driver"], row.get("docs_cover", ""))
    assert all(floor.cuda_major == major for major, floor in facts.mvc.items())
