"""Checks of XLA's tools in one environment: the ``ptxas`` it will run (and whether that ptxas
knows the GPU's architecture) and the ``libdevice`` it needs, where TensorFlow looks for them."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.version import Version

from tfgpu.doctor.env_checks import REPAIR
from tfgpu.doctor.findings import Finding, fail, ok, warn
from tfgpu.doors import untrusted
from tfgpu.process.runner import Runner

_PTXAS_VERSION = re.compile(r"V(\d+\.\d+\.\d+)")
# ptxas knows an architecture from this CUDA release on [MESON] (compat-facts section 5).
_ARCH_NEEDS: dict[tuple[int, ...], str] = {(8, 9): "11.8", (9, 0): "11.8", (10, 0): "12.8", (12, 0): "12.8"}


def _toolkit_dirs(site: Path | None) -> list[Path]:
    """Where pip wheels keep ptxas and libdevice: ``nvidia/cuda_nvcc`` (CUDA 11/12 wheels) and the
    merged ``nvidia/cu13`` tree of CUDA 13's wheels (newest first)."""
    if site is None:
        return []
    merged = sorted(
        (p for p in (site / "nvidia").glob("cu[0-9][0-9]") if p.is_dir()), key=lambda p: p.name, reverse=True
    )
    return [site / "nvidia" / "cuda_nvcc", *merged]


def xla_tools(env, host, environ: dict[str, str]) -> list[Finding]:
    site = env.site_packages
    toolkits = _toolkit_dirs(site)
    candidates = [env.root / "bin" / "ptxas", *(d / "bin" / "ptxas" for d in toolkits)]
    ptxas = next((p for p in candidates if p.exists()), None)
    findings = []
    if ptxas is None:
        findings.append(
            warn(
                "xla.ptxas",
                "No ptxas in the env: XLA falls back to the driver to compile PTX",
                f"uv pip install --python {env.python} 'nvidia-cuda-nvcc-cu12>=12.6.3' (CUDA 12 builds)",
                *(f"looked for {p}" for p in candidates),
            )
        )
    else:
        done = Runner().capture([str(ptxas), "--version"], timeout=20, clean=False)
        out = done.output if done.started else done.stderr
        match = _PTXAS_VERSION.search(out)
        version = match.group(1) if match else None
        evidence = (f"{ptxas}: {version or 'version unknown'}",)
        too_old = [
            d
            for d in host.gpus
            if version
            and d.compute_capability
            and Version(version) < Version(_ARCH_NEEDS.get(tuple(int(x) for x in d.compute_capability.split(".")), "0"))
        ]
        if version is None:
            # A ptxas that hangs, crashes or prints no version is no ptxas XLA can use: never an ok.
            how = (
                "did not answer `--version` within 20 s"
                if done.returncode == 124 and done.seconds >= 20
                else f"exited {done.returncode} without saying its version"
                if done.returncode
                else "printed no version"
            )
            findings.append(
                warn(
                    "xla.ptxas",
                    f"The env's ptxas {how}: XLA may not be able to compile PTX with it",
                    f"uv pip install --python {env.python} --reinstall 'nvidia-cuda-nvcc-cu12>=12.6.3'",
                    *evidence,
                )
            )
        elif too_old:
            findings.append(
                fail(
                    "xla.ptxas",
                    f"ptxas {version} does not know {too_old[0].name}'s sm_"
                    f"{too_old[0].compute_capability.replace('.', '')}",
                    "Install a newer nvidia-cuda-nvcc-cu12 in the env.",
                    *evidence,
                )
            )
        elif version and Version("12.0") <= Version(version) <= Version("12.6.2"):
            findings.append(
                warn(
                    "xla.ptxas",
                    f"ptxas {version} is one of the versions XLA says miscompile",
                    f"uv pip install --python {env.python} 'nvidia-cuda-nvcc-cu12>=12.6.3'",
                    *evidence,
                    "XLA: CUDA 12.x.y up to and including 12.6.2 miscompile certain edge cases around clamping.",
                )
            )
        else:
            findings.append(ok("xla.ptxas", f"ptxas {version} for XLA", *evidence))
    flag = re.search(r"--xla_gpu_cuda_data_dir=(\S+)", environ.get("XLA_FLAGS", ""))
    dirs = [Path(flag.group(1))] if flag else []
    dirs += toolkits
    recorded = _recorded_data_dir(env.root)
    dirs += [recorded] if recorded else []
    libdevice = next(
        (
            d / "nvvm" / "libdevice" / "libdevice.10.bc"
            for d in dirs
            if (d / "nvvm" / "libdevice" / "libdevice.10.bc").exists()
        ),
        None,
    )
    if libdevice:
        findings.append(ok("xla.libdevice", "libdevice for XLA", str(libdevice)))
    else:
        findings.append(
            fail(
                "xla.libdevice",
                "XLA will not find libdevice ('Can't find libdevice directory')",
                f"`{REPAIR.format(root=env.root)}` adds nvidia-cuda-nvcc and sets XLA_FLAGS for the env;"
                f" by hand: uv pip install --python {env.python} nvidia-cuda-nvcc-cu12 and set XLA_FLAGS="
                "--xla_gpu_cuda_data_dir=<site-packages>/nvidia/cuda_nvcc.",
                *(f"looked in {d}" for d in dirs),
            )
        )
    return findings


def _recorded_data_dir(root: Path) -> Path | None:
    """Where the env's own activation points XLA (``etc/tfgpu/layout.json``): conda and system envs
    keep libdevice outside site-packages (the env root, a link under etc/tfgpu/cuda, the toolkit)."""
    try:
        data = untrusted.load_json(root / "etc" / "tfgpu" / "layout.json", untrusted.ENV_FILE)["cuda_data_dir"]
    except (untrusted.Unreadable, KeyError, TypeError):
        return None
    return root / data if data else None
