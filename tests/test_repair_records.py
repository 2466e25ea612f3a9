"""``repair``'s typed outcomes (``tfgpu.repair.records``) and the ``repair --json`` document they
make: which keys, in which order, in each ending (a contract scripts read; the end-to-end documents
are in tests/test_repair.py). Built from the real survey, plan and target types."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu.envs.which import EnvTarget
from tfgpu.records import FrozenInstanceError, replace
from tfgpu.repair.plan import PackageChange, RepairPlan
from tfgpu.repair.records import (
    AddedPackage,
    Applied,
    ChangedPackage,
    Checked,
    RepairOutcome,
    RepairRequest,
    TakenBack,
    UndoOutcome,
)
from tfgpu.repair.survey import EnvSurvey

HEAD = ["prefix", "tensorflow", "env", "plan", "dry_run"]


def _outcome(dry_run: bool = False, left_open=()) -> RepairOutcome:
    prefix = Path("/envs/a")
    survey = EnvSurvey(
        prefix=prefix,
        kind="venv",
        python=prefix / "bin" / "python",
        python_version="3.11",
        site_packages=prefix / "lib" / "python3.11" / "site-packages",
        tf_version="2.21.0",
        tf_distribution="tensorflow",
        cuda_build=True,
        build_info={},
    )
    plan = RepairPlan(
        survey=survey,
        resolution=None,
        manager="pip",
        add=[PackageChange("nvidia-cudnn-cu12", "nvidia-cudnn-cu12>=9.3")],
        left_open=tuple(left_open),
    )
    return RepairOutcome(survey=survey, plan=plan, dry_run=dry_run, which_env=EnvTarget(prefix, "--prefix"))


def test_a_dry_run_says_what_it_would_do_and_where():
    document = _outcome(dry_run=True).to_dict()
    assert list(document) == [*HEAD, "repaired", "nothing_to_do", "which_env"]
    assert document["repaired"] is False and document["nothing_to_do"] is False


def test_a_declined_repair_says_so_instead_of_nothing_to_do():
    assert list(replace(_outcome(), declined=True).to_dict()) == [*HEAD, "repaired", "declined", "which_env"]


def test_a_repair_that_changed_the_env_lists_its_changes_then_how_it_ended():
    applied = Applied(
        added=(AddedPackage.of({"name": "nvidia-cudnn-cu12", "version": "9.3.0.75", "record": "ab"}),),
        changed=(ChangedPackage.of({"name": "cudnn", "from": "8.9", "to": "9.3", "conda": True}),),
        files=("bin/ptxas",),
        journal="/envs/a/etc/tfgpu/repair.json",
    )
    done = replace(_outcome(), repaired=True, applied=applied, log="/logs/repair.log")
    checked = replace(done, checked=Checked("tfgpu-install repair --prefix /envs/a --undo", False, {"code": "skipped"}))
    document = checked.to_dict()
    assert list(document) == [
        *HEAD,
        *("repaired", "nothing_to_do", "added", "changed", "files", "journal", "log", "which_env"),
        *("undo", "verified", "not_verified"),
    ]
    assert document["added"] == [{"name": "nvidia-cudnn-cu12", "version": "9.3.0.75", "record": "ab"}]
    assert document["changed"] == [{"name": "cudnn", "from": "8.9", "to": "9.3", "conda": True}]
    report = {"ok": True}
    verified = replace(done, checked=Checked("undo", True, None, report)).to_dict()
    assert list(verified)[-4:] == ["undo", "verify", "verified", "not_verified"] and verified["verify"] == report


def test_a_library_left_open_fails_a_repair_but_not_its_dry_run():
    left = [("lib/libcuda.so.1", "/usr/lib/libcuda.so.1")]
    assert _outcome(left_open=left).leaves_open and not _outcome(dry_run=True, left_open=left).leaves_open
    assert not _outcome().leaves_open


def test_an_undo_lists_what_it_put_back_or_where_the_journal_went():
    taken = TakenBack(removed=("a",), restored=("b",), files=("bin/ptxas",), swept=(), left=("c (kept)",))
    document = UndoOutcome("/envs/a", undone=True, taken_back=taken).to_dict()
    assert document == {
        "prefix": "/envs/a",
        "undone": True,
        "removed": ["a"],
        "restored": ["b"],
        "files": ["bin/ptxas"],
        "swept": [],
        "left": ["c (kept)"],
    }
    aside = UndoOutcome("/envs/a", undone=False, journal_set_aside="/envs/a/etc/tfgpu/repair.json.x").to_dict()
    assert list(aside) == ["prefix", "undone", "journal_set_aside"]


def test_a_request_is_built_once_and_not_changed_after():
    request = RepairRequest(prefix="/envs/a", offline=True, channels=("conda-forge",))
    with pytest.raises(FrozenInstanceError):
        request.offline = False  # type: ignore[misc]
    assert replace(request, dry_run=True).offline is True and request.dry_run is False
