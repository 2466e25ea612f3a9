"""A real single-node Slurm cluster on localhost for the tests: Debian's munged, slurmctld and
slurmd started as this user with a minimal slurm.conf in a temporary directory (its own ports,
state, spool and munge socket), stopped and removed afterwards. The node has no GPUs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")


def missing() -> list[str]:
    """The Slurm/munge programs that are not installed (``.ci/run`` installs them)."""
    return [name for name in DAEMONS if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists()]


def _exe(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


SLURM_CONF = """\
ClusterName=tfgpu-test
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/munge
AuthInfo=socket={run}/munge.sock
CredType=cred/munge
SlurmUser={user}
SlurmdUser={user}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


class Cluster:
    """``with Cluster(tmp) as cluster: cluster.submit([...])``."""

    def __init__(self, root: Path, ctld_port: int = 16917, d_port: int = 16918):
        self.root, self.run = root, root / "run"
        self.conf = root / "slurm.conf"
        self.ports = (ctld_port, d_port)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def __enter__(self) -> Cluster:
        for sub in ("run", "state", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        cpus = max(2, os.cpu_count() or 2)
        import getpass

        self.conf.write_text(
            SLURM_CONF.format(
                root=self.root,
                run=self.run,
                user=getpass.getuser(),
                ctld_port=self.ports[0],
                d_port=self.ports[1],
                cpus=cpus,
            )
        )
        subprocess.run(
            [
                _exe("munged"),
                f"--key-file={key}",
                f"--socket={self.run}/munge.sock",
                f"--pid-file={self.run}/munged.pid",
                f"--log-file={self.root}/munged.log",
                f"--seed-file={self.run}/munge.seed",
                "--force",
            ],
            check=True,
            env=self.env,
            timeout=30,
        )
        subprocess.run([_exe("slurmctld"), "-i", "-c"], check=True, env=self.env, timeout=30)
        subprocess.run([_exe("slurmd"), "-N", "localhost"], check=True, env=self.env, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = subprocess.run([_exe("sinfo"), "-h", "-o", "%T"], capture_output=True, text=True, env=self.env)
            if state.stdout.strip() == "idle":
                return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(
            f"the test Slurm node never became idle: {state.stdout} {state.stderr}\n"
            + (self.root / "slurmctld.log").read_text()[-2000:]
        )

    def submit(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [_exe("sbatch"), "--parsable", *argv],
            capture_output=True,
            text=True,
            cwd=cwd,
            env={**self.env, **(env or {})},
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def wait(self, job: str, timeout: float = 600) -> str:
        """The job's final state (COMPLETED, FAILED, ...)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done = subprocess.run([_exe("scontrol"), "show", "job", job], capture_output=True, text=True, env=self.env)
            match = re.search(r"JobState=(\S+)", done.stdout)
            if match and match.group(1) not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING"):
                return match.group(1)
            time.sleep(1)
        return "TIMEOUT"

    def __exit__(self, *exc) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            pid_file = self.run / f"{name}.pid"
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        time.sleep(1)
