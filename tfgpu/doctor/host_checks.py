"""Checks of the machine itself: the driver (every source), WSL2, installed CUDA toolkits."""

from __future__ import annotations

import glob
import os

from packaging.version import Version

from tfgpu.doctor.findings import Finding, fail, ok, skip, warn
from tfgpu.doors import untrusted
from tfgpu.resolver.drivers import driver_at_least, driver_need

WSL_LIB = "/usr/lib/wsl/lib"


def _readings(host) -> tuple[str, ...]:
    if host.driver is None:
        return tuple(n for n in host.notes if "driver" in n.lower())
    return tuple(
        f"{r.source}: "
        + (f"driver {r.driver_version or '-'}, CUDA {r.cuda or '-'}" if r.ok else f"no answer ({r.error})")
        for r in host.driver.readings
    )


# How each distribution installs NVIDIA's driver: its own packages where it has them (Ubuntu's
# ubuntu-drivers picks the recommended branch; Debian's nvidia-driver is in non-free), else
# NVIDIA's CUDA repository for that distribution, else NVIDIA's download page.
_DRIVER_INSTALL = (
    (
        "ubuntu",
        "`sudo ubuntu-drivers install` (Ubuntu's recommended driver; or `sudo apt install nvidia-driver-<branch>`)",
    ),
    (
        "debian",
        "`sudo apt install nvidia-driver firmware-misc-nonfree` with the non-free and non-free-firmware "
        "components enabled in /etc/apt/sources.list (newer branches than Debian's: NVIDIA's CUDA "
        "repository for Debian, `sudo apt install cuda-drivers`)",
    ),
    ("fedora", "`sudo dnf install akmod-nvidia` from RPM Fusion"),
    ("red hat", "`sudo dnf install cuda-drivers` from NVIDIA's CUDA repository for RHEL"),
    ("rocky", "`sudo dnf install cuda-drivers` from NVIDIA's CUDA repository for RHEL"),
    ("alma", "`sudo dnf install cuda-drivers` from NVIDIA's CUDA repository for RHEL"),
    ("arch", "`sudo pacman -S nvidia`"),
)


def driver_install_hint(host, minimum: str | None = None) -> str:
    """How to install the NVIDIA driver on ``host``'s distribution (its os-release names it)."""
    if host.os == "wsl2":
        return "Install the NVIDIA driver on Windows (not inside WSL); WSL2 then finds it in /usr/lib/wsl/lib."
    release = (host.os_release or "").lower()
    how = next(
        (text for key, text in _DRIVER_INSTALL if key in release),
        "your distribution's NVIDIA driver package, or NVIDIA's installer from "
        "https://www.nvidia.com/Download/index.aspx",
    )
    need = f" (this env needs {minimum} or newer)" if minimum else ""
    return f"Install the NVIDIA driver{need}: {how}; then reboot and check with `nvidia-smi`."


def driver_present(host, cuda: str | None = None) -> list[Finding]:
    """driver.present / driver.sources-agree: every detection source, and whether they agree.
    ``cuda``: the env's build CUDA, so the fix names the driver it needs."""
    if host.os == "macos":
        return [skip("driver.present", "macOS has no NVIDIA driver (TensorFlow uses tensorflow-metal)")]
    if host.driver is None or not host.driver.version and not host.driver.cuda:
        need = driver_need(cuda, "wsl2" if host.os == "wsl2" else "linux") if cuda else None
        fix = driver_install_hint(host, need.minimum if need else None)
        return [fail("driver.present", "No NVIDIA driver answered", fix, *_readings(host))]
    findings = [
        ok(
            "driver.present",
            f"NVIDIA driver {host.driver.version or '?'} (CUDA {host.driver.cuda or '?'})",
            *_readings(host),
        )
    ]
    if host.driver.agree:
        findings.append(ok("driver.sources-agree", "Every source that answered agrees"))
    else:
        findings.append(
            warn(
                "driver.sources-agree",
                "Driver sources disagree",
                "Reboot (or reload the nvidia kernel module) after a driver upgrade, so the "
                "loaded kernel module matches the installed libraries.",
                host.driver.disagreement or "",
            )
        )
    return findings


def driver_new_enough(host, cuda: str | None) -> list[Finding]:
    """driver.supports-build: the driver against the env's CUDA (MVC floor, PTX-JIT caveat)."""
    if host.os == "macos" or not cuda:
        return [skip("driver.supports-build", "No CUDA build to check the driver against")]
    if host.driver is None or not host.driver.version:
        return [skip("driver.supports-build", "No driver version known", *_readings(host))]
    need = driver_need(cuda, "wsl2" if host.os == "wsl2" else ("windows" if host.os == "windows" else "linux"))
    if need is None:
        return [skip("driver.supports-build", f"No driver minimum recorded for CUDA {cuda}")]
    found = host.driver.version
    if not driver_at_least(found, need.minimum):
        return [
            fail(
                "driver.supports-build",
                f"Driver {found} is too old for CUDA {cuda}",
                f"Upgrade the NVIDIA driver to {need.minimum} or newer, or use an older TensorFlow "
                "(`tfgpu-install plan` names the newest one this driver runs).",
                need.rule,
            )
        ]
    if not driver_at_least(found, need.toolkit_minimum):
        return [
            warn(
                "driver.supports-build",
                f"Driver {found} runs CUDA {cuda} by minor-version compatibility only",
                f"Upgrade to {need.toolkit_minimum}+ so PTX the driver JIT-compiles cannot fail "
                "(CUDA_ERROR_UNSUPPORTED_PTX_VERSION).",
                need.rule,
            )
        ]
    return [ok("driver.supports-build", f"Driver {found} >= {need.minimum} for CUDA {cuda}", need.rule)]


def wsl(host, environ: dict[str, str], fs_root: str = "/") -> list[Finding]:
    """wsl.libcuda / wsl.no-linux-driver: WSL2's driver comes from Windows.

    ``fs_root`` lets tests point the file lookups at a WSL2-shaped tree."""
    if host.os != "wsl2":
        return [skip("wsl.libcuda", "Not WSL2")]

    def at(path: str) -> str:
        return os.path.join(fs_root, path.lstrip("/"))

    findings = []
    libcuda = f"{WSL_LIB}/libcuda.so.1"
    confs = [c for c in glob.glob(at("/etc/ld.so.conf.d/*.conf")) if os.path.isfile(c)]
    on_path = WSL_LIB in environ.get("LD_LIBRARY_PATH", "").split(":") or any(
        WSL_LIB in (untrusted.text_or_none(conf, untrusted.SYSTEM_FILE, errors="replace") or "") for conf in confs
    )
    if not os.path.exists(at(libcuda)):
        findings.append(
            fail(
                "wsl.libcuda",
                f"{libcuda} is missing",
                "Install or update the NVIDIA driver on Windows (>= 528.33 for the CUDA 12 builds, TF 2.15+); "
                "then `wsl --shutdown` and reopen.",
                f"looked for {libcuda}",
            )
        )
    elif not on_path:
        findings.append(
            warn(
                "wsl.libcuda",
                f"{WSL_LIB} is not on the loader path",
                f"export LD_LIBRARY_PATH={WSL_LIB}:$LD_LIBRARY_PATH (or add it to /etc/ld.so.conf.d "
                "and run `sudo ldconfig`).",
                f"{libcuda} exists",
            )
        )
    else:
        findings.append(ok("wsl.libcuda", f"libcuda from the Windows driver at {WSL_LIB}"))
    linux_driver = [p for p in glob.glob(at("/usr/lib/x86_64-linux-gnu/libcuda.so*")) if not os.path.islink(p)]
    module = at("/proc/driver/nvidia/version")
    if linux_driver or os.path.exists(module):
        findings.append(
            fail(
                "wsl.no-linux-driver",
                "A Linux NVIDIA driver is installed inside WSL2",
                "Remove it (`sudo apt remove --purge 'nvidia-driver-*' 'libnvidia-*'`): inside WSL2 "
                "the Windows driver provides libcuda, and a Linux one shadows it.",
                *linux_driver,
                *([module] if os.path.exists(module) else []),
            )
        )
    else:
        findings.append(ok("wsl.no-linux-driver", "No Linux driver inside WSL2"))
    return findings


def toolkits(host, tf_cuda: str | None) -> list[Finding]:
    """toolkit.versions: the installed toolkit vs the driver's capability vs TF's build CUDA."""
    if not host.toolkits:
        return [ok("toolkit.versions", "No system CUDA toolkit installed (TensorFlow does not need one)")]
    sentences = []
    driver_cuda = host.driver.cuda if host.driver else None
    newer = []
    for kit in host.toolkits:
        sentences.append(
            f"CUDA toolkit {kit.version} is installed at {kit.path} ({kit.source}): that is what "
            "`nvcc --version` reports, not what TensorFlow uses."
        )
        if driver_cuda and Version(kit.version).release[:2] > Version(driver_cuda).release[:2]:
            newer.append(kit)
    sentences.append(
        f"The driver supports CUDA up to {driver_cuda}: that is the 'CUDA Version' nvidia-smi prints."
        if driver_cuda
        else "No driver answered, so no CUDA version is supported yet."
    )
    if tf_cuda:
        sentences.append(f"TensorFlow was built with CUDA {tf_cuda} and uses the CUDA libraries in its env.")
    if newer:
        return [
            warn(
                "toolkit.versions",
                f"Toolkit {newer[0].version} is newer than the driver's CUDA {driver_cuda}",
                "Programs built with that toolkit need a newer driver; TensorFlow is unaffected. Upgrade the "
                "driver or use a toolkit <= the driver's CUDA.",
                *sentences,
            )
        ]
    return [ok("toolkit.versions", "Toolkit, driver and TensorFlow CUDA versions explained", *sentences)]
