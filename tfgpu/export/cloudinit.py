"""cloud-init user-data that runs the bash export once, at the first boot of a new machine.

``write_files`` puts the script at ``/opt/tfgpu-install/install-tf.sh``; ``runcmd`` runs it as
root with its output in ``/var/log/tfgpu-install.log`` (the script keeps its own detailed log
beside the env). The env lands in ``/opt/tfgpu-install/envs/<name>``; system mode writes
``/etc/profile.d`` and ``/etc/ld.so.conf.d``. The machine's image must already have the NVIDIA
driver (cloud GPU images do); without one, the verification at the end fails and says so.
"""

from __future__ import annotations

from tfgpu.doors import quoting, untrusted
from tfgpu.export.bash import comment, header, render_bash

SCRIPT_PATH = "/opt/tfgpu-install/install-tf.sh"
LOG_PATH = "/var/log/tfgpu-install.log"


def embedded_script(user_data: str) -> str:
    """The bash script inside user-data rendered by :func:`render_cloud_init` (for checks)."""
    return untrusted.parse_yaml(user_data, untrusted.PACKAGE_DATA, "user-data")["write_files"][0]["content"]


def render_cloud_init(resolution, pins=None) -> str:
    """``#cloud-config`` user-data for ``resolution`` (the YAML written by PyYAML's serializer)."""
    script = render_bash(resolution, pins)
    command = f"HOME=/root bash {SCRIPT_PATH} >> {LOG_PATH} 2>&1"
    document = {
        "write_files": [{"path": SCRIPT_PATH, "permissions": "0755", "owner": "root:root", "content": script}],
        "runcmd": [["bash", "-c", command]],
    }
    return "\n".join(
        [
            "#cloud-config",
            comment(header(resolution, "cloud-init user-data (runs the bash installer at first boot)", pins=pins)),
            f"# Progress and result: {LOG_PATH} (and `cloud-init status --long`).",
            quoting.yaml_document(document),
        ]
    )
