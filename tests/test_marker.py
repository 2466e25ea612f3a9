"""``tfgpu.envs.marker``: the env's marker is read in one place into one typed record
(:class:`tfgpu.envs.marker.Marker`), which gives the file's JSON back byte for byte; a field of the
wrong type reads as missing, a field this version does not read is kept. The markers here are
written by the real ``marker.write``; ``tests/hostile/test_hostile_ownership.py`` holds what proves
ownership and what does not."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

import tfgpu
from tfgpu.envs import marker
from tfgpu.records import fields, is_record

ENV_ID = "0123456789abcdef0123456789abcdef"

# The fields each installer writes beside the identity (tfgpu.installers.base.write_marker and its
# modes' payloads), in their order: pip's, conda's (with its `conda` list, which no reader reads),
# system mode's (its toolkit and the downloads it was built from).
PIP = {
    "name": "tf",
    "tensorflow": "2.21.0",
    "python": "3.12",
    "cuda": "12.5",
    "cudnn": "9.3",
    "min_driver": "525.60.13",
    "requirements": ["tensorflow[and-cuda]==2.21.0"],
    "locked": ["tensorflow==2.21.0", "nvidia-cudnn-cu12==9.3.0.75"],
    "installed": {"tensorflow": "2.21.0", "numpy": "2.1.0"},
    "find_links": [],
    "offline": False,
    "from_lock": "/work/tf.lock sha256:" + "ab" * 32,
    "cuda_apart": {"dir": "lib/tfgpu/cuda12", "cuda": 12, "locked": ["nvidia-cublas-cu12==12.5.3.2"]},
    "mode": "pip",
    "engine": "uv",
}
CONDA = {
    "name": None,
    "tensorflow": "2.13.1",
    "python": "3.11",
    "cuda": None,
    "cudnn": None,
    "min_driver": None,
    "requirements": [],
    "locked": [],
    "installed": {"tensorflow": "2.13.1"},
    "find_links": [],
    "offline": True,
    "mode": "conda",
    "engine": "rattler",
    "channels": ["https://conda.anaconda.org/conda-forge"],
    "virtual_cuda": "12.2",
    "tf_source": "conda-forge",
    "cpu_only": False,
    "conda": ["tensorflow=2.13.1=cuda120py311h_0", "python=3.11.9=h_0"],
}
SYSTEM = {
    **PIP,
    "mode": "system",
    "toolkit": "/opt/cuda-12.5",
    "toolkit_files": {"runfile_sha256": "cd" * 32, "cudnn_sha256": "ef" * 32},
    "downloads": [{"filename": "cuda_12.5.run", "url": "https://example.invalid/cuda_12.5.run"}],
}


def written(tmp_path: Path, fields: dict, kernels: tuple[str, ...] = ()) -> Path:
    marker.write(tmp_path, env_id=ENV_ID, made_for=os.path.realpath(tmp_path), fields=fields, kernels=kernels)
    return tmp_path / marker.NAME


@pytest.mark.parametrize("fields", [PIP, CONDA, SYSTEM], ids=["pip", "conda", "system"])
def test_a_written_marker_reads_back_as_a_record_that_writes_the_same_json(tmp_path, fields):
    path = written(tmp_path, fields, kernels=("tfgpu-env-tf-01234567",))
    found = marker.read(tmp_path)
    assert is_record(found) and found == marker.proof(tmp_path)
    assert json.dumps(found.to_dict(), indent=2) + "\n" == path.read_text(encoding="utf-8")
    assert (found.id, found.tensorflow, found.mode, found.marker_format) == (
        ENV_ID,
        fields["tensorflow"],
        fields["mode"],
        marker.FORMAT,
    )
    assert found.kernels == ["tfgpu-env-tf-01234567"]
    assert found.locked == tuple(fields["locked"])  # a JSON list reads as a tuple
    assert set(found.extra) == set(fields) - set(marker._FIELDS)  # conda's `conda`, system's `downloads`


def test_system_modes_toolkit_fields_and_the_apart_directory_read_as_attributes(tmp_path):
    written(tmp_path, SYSTEM)
    found = marker.proof(tmp_path)
    assert found.toolkit == "/opt/cuda-12.5" and found.toolkit_files == SYSTEM["toolkit_files"]
    assert found.installed == {"tensorflow": "2.21.0", "numpy": "2.1.0"}
    assert found.apart_dir == "lib/tfgpu/cuda12"
    assert found.extra == {"downloads": SYSTEM["downloads"]}


def test_a_field_of_the_wrong_type_reads_as_missing_and_the_rest_is_kept(tmp_path):
    document = {
        "tool": "tfgpu-install",
        "tensorflow": ["2.21.0"],
        "mode": 3,
        "marker_format": True,  # a bool is no format number
        "offline": "yes",
        "toolkit": 5,
        "installed": ["tensorflow"],
        "owned": {"kernels": ["ok-name", 7, None]},
        "cuda_apart": {"dir": ["lib"]},
        "created": None,
        "future_field": {"kept": [1, 2]},
        "extra": "a file's own key of that name",
    }
    (tmp_path / marker.NAME).write_text(json.dumps(document))
    found = marker.read(tmp_path)
    wrong = ("tensorflow", "mode", "marker_format", "offline", "toolkit", "installed")
    assert all(getattr(found, name) is None for name in wrong)
    assert found.kernels == ["ok-name"] and found.apart_dir is None and found.created is None
    assert found.extra == {"future_field": {"kept": [1, 2]}, "extra": "a file's own key of that name"}
    assert found.to_dict() == {key: value for key, value in document.items() if key not in wrong}
    assert found.mistyped == wrong


def test_the_record_has_one_attribute_for_each_field_the_reader_checks():
    assert set(fields(marker.Marker)) - {"extra", "present", "mistyped"} == set(marker._FIELDS)


@pytest.mark.parametrize("text", ["[1]", '"tfgpu-install"', "{", "", "null"])
def test_a_marker_that_is_not_a_json_object_reads_as_none(tmp_path, text):
    (tmp_path / marker.NAME).write_text(text)
    assert marker.read(tmp_path) is None and marker.proof(tmp_path) is None
    assert marker.why_not(tmp_path) == f"its {marker.NAME} is not valid"


def test_why_not_tells_a_marker_without_a_format_from_one_that_holds_null(tmp_path):
    (tmp_path / marker.NAME).write_text(json.dumps({"tool": "tfgpu-install"}))
    assert marker.why_not(tmp_path).endswith("(format 1)")
    (tmp_path / marker.NAME).write_text(json.dumps({"tool": "tfgpu-install", "marker_format": None}))
    assert (
        marker.why_not(tmp_path)
        == f"its {marker.NAME} holds marker_format null, which no tfgpu-install wrote (edited by hand?)"
    )


def test_why_not_shows_a_huge_format_cut_short(tmp_path):
    (tmp_path / marker.NAME).write_text('{"tool": "tfgpu-install", "marker_format": -' + "9" * 4000 + "}")
    said = marker.why_not(tmp_path)
    assert len(said) < 150 and "(4001 characters)" in said and "no tfgpu-install wrote" in said


@pytest.mark.parametrize("value", [0, -1, -(10**18)])
def test_why_not_names_a_format_below_the_first_as_never_written_not_as_older(tmp_path, value):
    (tmp_path / marker.NAME).write_text(json.dumps({"tool": "tfgpu-install", "marker_format": value}))
    assert (
        marker.why_not(tmp_path)
        == f"its {marker.NAME} holds marker_format {value}, which no tfgpu-install wrote (edited by hand?)"
    )


@pytest.mark.parametrize("value", ["2", True, [2], 2.0, {"format": 2}])
def test_why_not_names_a_format_of_the_wrong_type_as_such_not_as_format_1(tmp_path, value):
    (tmp_path / marker.NAME).write_text(json.dumps({"tool": "tfgpu-install", "marker_format": value}))
    assert marker.why_not(tmp_path) == f"its {marker.NAME} holds a marker_format that is not a number (edited by hand?)"


def test_why_not_names_a_newer_format_as_newer(tmp_path):
    (tmp_path / marker.NAME).write_text(json.dumps({"tool": "tfgpu-install", "marker_format": marker.FORMAT + 1}))
    assert "from a newer tfgpu-install" in marker.why_not(tmp_path)


def _calls_reading_the_marker_file(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            text = ast.unparse(node)
            names_it = "tfgpu-env.json" in text or "marker.NAME" in text
            reads = isinstance(node.func, ast.Attribute) and node.func.attr in (
                "load_json",
                "json_or_none",
                "read_text",
                "read_bytes",
                "open",
                "loads",
            )
            if names_it and reads:
                found.append(f"{path}:{node.lineno}: {text[:80]}")
    return found


def test_only_the_marker_module_reads_the_marker_file():
    """The door: any other module that opened tfgpu-env.json itself would meet the file's keys (and
    its wrong types) without the one check in ``marker.read``."""
    package = Path(tfgpu.__file__).parent
    offenders = [
        line
        for path in sorted(package.rglob("*.py"))
        if path != package / "envs" / "marker.py"
        for line in _calls_reading_the_marker_file(path)
    ]
    assert offenders == []
