"""ops.create and the one apply loop, in-process, with ``proc.RecordingRunner`` at the process
boundary: what runs, in what order, with what environment, and what a failing command leaves
(nothing). The backend is a minimal real subclass; everything around it (locate, the target
lock, staging, commit, rollback, the marker) is the real code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfgpu.envs import marker, txn
from tfgpu.errors import OperationError
from tfgpu.installers.base import Backend, Options, Source, Step, StepKind
from tfgpu.ops import create
from tfgpu.process.runner import Completed, RecordingRunner
from tfgpu.progress import RecordingReporter
from tfgpu.resolver import make_request, resolve


class ScriptedBackend(Backend):
    """Writes a file, runs two commands, records the env, commits."""

    mode = "pip"

    def plan(self, resolution, location, options, source, facts):
        staging = location.staging
        return [
            Step(StepKind.REQUIREMENTS, "Write the requirements", writes=(str(staging / "req.in"),), content="x==1"),
            Step(StepKind.RUN, "First command", ("/bin/first", str(staging)), env=(("ONLY_HERE", "1"),)),
            Step(StepKind.RUN, "Second command", ("/bin/second",)),
            Step(StepKind.MARKER, "Record", writes=(str(staging / marker.NAME),), payload={"mode": "pip"}),
            Step(StepKind.COMMIT, "Move into place", writes=(str(location.prefix),)),
        ]


@pytest.fixture
def resolution():
    return resolve(make_request(tf="2.21", mode="pip", os="linux", arch="x86_64", python="3.12"), None)


def build(tmp_path, resolution, runner, **options):
    reporter = RecordingReporter()
    result = create(
        resolution,
        name=None,
        prefix=str(tmp_path / "env"),
        options=Options(verify=False, **options),
        source=Source(),
        reporter=reporter,
        runner=runner,
        backend=ScriptedBackend(),
    )
    return result, reporter


def test_steps_run_in_order_through_the_runner_with_their_environment(tmp_path, resolution):
    runner = RecordingRunner()
    result, reporter = build(tmp_path, resolution, runner)
    staging = tmp_path / ".env.tfgpu-staging"
    assert runner.calls == [("/bin/first", str(staging)), ("/bin/second",)]
    assert [event[3] for event in reporter.events if event[0] == "step"] == [s.title for s in result.steps]
    assert (tmp_path / "env" / "req.in").read_text() == "x==1\n"
    found = marker.proof(tmp_path / "env")
    assert found.id == result.location.id
    # The marker the installers' step wrote reads back as the record, and the record as those bytes.
    assert json.dumps(found.to_dict(), indent=2) + "\n" == (tmp_path / "env" / marker.NAME).read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["env"]


def test_a_failing_command_rolls_everything_back(tmp_path, resolution):
    runner = RecordingRunner(results={"second": Completed(("/bin/second",), 2, "error: it broke\n")})
    with pytest.raises(OperationError) as caught:
        build(tmp_path, resolution, runner)
    assert caught.value.code == "install-failed" and "it broke" in caught.value.message
    assert list(tmp_path.iterdir()) == []  # no env, no staging, no lock file


def test_the_target_is_locked_while_the_steps_run(tmp_path, resolution):
    seen = []

    def second(argv):
        try:
            with txn.TargetLock(tmp_path / "env"):
                seen.append("got the lock")
        except OperationError as error:
            seen.append(error.code)
        return Completed(argv, 0, "")

    build(tmp_path, resolution, RecordingRunner(results={"second": second}))
    assert seen == ["target-busy"]


def test_a_dry_run_runs_nothing_and_writes_nothing(tmp_path, resolution):
    runner = RecordingRunner()
    result = create(
        resolution,
        name=None,
        prefix=str(tmp_path / "env"),
        options=Options(),
        runner=runner,
        backend=ScriptedBackend(),
        dry_run=True,
    )
    assert runner.calls == [] and list(tmp_path.iterdir()) == []
    assert [step.kind for step in result.steps][-1] is StepKind.COMMIT


def test_the_recording_runner_streams_its_scripted_output(tmp_path):
    lines = []
    runner = RecordingRunner(results={"tool": Completed(("tool",), 0, "one\ntwo\n")})
    done = runner.run(["tool", "x"], on_line=lines.append)
    assert done.ok and lines == ["one", "two"] and runner.calls == [("tool", "x")]
    assert Path(runner.calls[0][0]).name == "tool"
