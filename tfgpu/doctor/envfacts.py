"""What an environment holds, read as files: no TensorFlow import.

The env is found from ``--prefix``/``--name`` (its root) or ``--interpreter`` (asked once for its
prefix and site-packages). TensorFlow's version comes from its dist-info, its CUDA configuration
from ``build_info.py`` (parsed with ``ast``), and, for what build_info.py no longer records (TF 2.22
keeps only ``is_cuda_build`` there), from the headers TensorFlow ships: ``cuda_config.h`` and
``cudnn_version.h`` under ``tensorflow/include/third_party/gpus/``. Its loader search path comes from
the RUNPATH of ``libtensorflow_framework.so.2``.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

from tfgpu.datasource.wheel_facts import parse_cuda_config, parse_cudnn_version
from tfgpu.doctor.reads import RunReads
from tfgpu.doors import pysource, untrusted
from tfgpu.envs import marker
from tfgpu.envs.marker import Marker
from tfgpu.errors import ImpossibleError
from tfgpu.process.runner import Runner
from tfgpu.records import factory, record

TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow_gpu",
    "tensorflow_cpu",
    "tensorflow_intel",
    "tensorflow_macos",
    "tf_nightly",
)


@record(frozen=False)
class EnvFacts:
    root: Path
    python: Path
    python_version: str | None = None
    site_packages: Path | None = None
    tf_distribution: str | None = None
    tf_version: str | None = None
    build_info: dict = factory(dict)
    framework: Path | None = None
    runpath: tuple[str, ...] = ()
    hook: Path | None = None
    activation: Path | None = None
    marker: Marker | None = None
    build_sources: dict = factory(dict)
    """Which file each build fact came from (``cuda_version`` -> ``.../cuda_config.h``)."""
    cudnn_compiled: str | None = None
    """The cuDNN of the shipped ``cudnn_version.h`` ("9.10.0"), where there is one."""
    header_capabilities: tuple[str, ...] = ()
    """Compute capabilities as ``cuda_config.h`` lists them ("6.0", ...; no SASS/PTX kinds)."""
    reads: RunReads = factory(RunReads, shown=False, compared=False)
    """This doctor run's reader of the env's files: each library read once, hashing bounded."""

    def to_dict(self) -> dict:
        return {
            "root": str(self.root),
            "python": str(self.python),
            "python_version": self.python_version,
            "site_packages": str(self.site_packages) if self.site_packages else None,
            "tensorflow": self.tf_version,
            "distribution": self.tf_distribution,
            "build_info": self.build_info,
            "build_sources": self.build_sources,
            "cudnn_compiled": self.cudnn_compiled,
            "load_hook": bool(self.hook),
            "activation": bool(self.activation),
        }


def parse_build_info(text: str) -> dict:
    """``build_info = {...}`` or module-level constants (TF 2.0-2.2) -> a dict of literals."""

    tree = pysource.parse(text)
    if not isinstance(tree, ast.Module):  # None: not Python
        return {}
    found: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.value
            if isinstance(target, ast.Call) and target.args and not target.keywords:
                target = target.args[0]  # collections.OrderedDict([(key, value), ...]) (TF 2.3+)
            value = pysource.literal(target)
            if value is pysource.NOT_LITERAL:
                continue
            if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
                value = dict(value)
            name = node.targets[0].id
            if name == "build_info" and isinstance(value, dict):
                found.update(value)
            else:
                found[name] = value
    if "cuda_version" not in found and "cuda_version_number" in found:
        found["cuda_version"] = found["cuda_version_number"]
    if "cudnn_version" not in found and "cudnn_version_number" in found:
        found["cudnn_version"] = found["cudnn_version_number"]
    return found


CUDA_CONFIG_H = (
    "tensorflow/include/third_party/gpus/cuda/cuda_config.h",
    "tensorflow/include/external/local_config_cuda/cuda/cuda/cuda_config.h",
)
CUDNN_VERSION_H = (
    "tensorflow/include/third_party/gpus/cudnn/include/cudnn_version.h",
    "tensorflow/include/external/cuda_cudnn/include/cudnn_version.h",
)


def read_headers(facts: EnvFacts, site: Path) -> None:
    """Fill what build_info.py lacks from cuda_config.h, and the compiled cuDNN from cudnn_version.h."""
    config_path = next((c for c in CUDA_CONFIG_H if (site / c).is_file()), None)
    cudnn_path = next((c for c in CUDNN_VERSION_H if (site / c).is_file()), None)
    if config_path is None and cudnn_path is None:
        return

    if config_path is not None and facts.build_info.get("is_cuda_build"):
        config = parse_cuda_config(
            untrusted.text_or_none(site / config_path, untrusted.ENV_FILE, errors="replace") or ""
        )
        for key, value in (("cuda_version", config.cuda), ("cudnn_version", config.cudnn)):
            if value and not facts.build_info.get(key):
                facts.build_info[key] = value
                facts.build_sources[key] = config_path
        facts.header_capabilities = config.compute_capabilities
    if cudnn_path is not None:
        facts.cudnn_compiled = (
            parse_cudnn_version(untrusted.text_or_none(site / cudnn_path, untrusted.ENV_FILE, errors="replace") or "")
            or None
        )


def _ask_python(python: Path) -> tuple[Path, str, Path]:

    script = (
        "import sys, sysconfig, json; print(json.dumps([sys.prefix, '%d.%d' % sys.version_info[:2], "
        "sysconfig.get_paths()['purelib']]))"
    )
    done = Runner().capture([str(python), "-I", "-B", "-c", script], timeout=30)
    try:
        prefix, version, purelib = untrusted.parse_json(done.output, untrusted.CHILD_OUTPUT, str(python))
    except (untrusted.Unreadable, ValueError, TypeError):
        raise ImpossibleError(
            "not-a-python",
            f"{python} does not run as a Python interpreter.",
            ["Give the environment's python, e.g. --interpreter ./env/bin/python."],
        ) from None
    return Path(prefix), version, Path(purelib)


def read_env(root: Path | None = None, python: Path | None = None) -> EnvFacts:
    """Everything doctor needs to know about one env."""
    if python is not None:
        prefix, version, asked = _ask_python(python)
        facts = EnvFacts(root=prefix, python=python, python_version=version, site_packages=asked)
    else:
        assert root is not None  # the env's root, where no interpreter is given
        if not root.is_dir():
            raise ImpossibleError(
                "no-such-env",
                f"There is no environment at {root}.",
                [
                    "Give the env's root with --prefix, its name with --name, or its interpreter with "
                    "--interpreter PATH."
                ],
            )
        facts = EnvFacts(root=root, python=root / "bin" / "python")
        sites = sorted(root.glob("lib/python3*/site-packages"))
        facts.site_packages = sites[0] if sites else None
        if facts.site_packages is None and not facts.python.exists():
            raise ImpossibleError(
                "not-an-env",
                f"{root} is not a Python environment: it has no bin/python and no lib/python3.*/site-packages.",
                [
                    "Give the env's root with --prefix (the directory holding bin/python), its name "
                    "with --name, or its interpreter with --interpreter.",
                    "`tfgpu-install list` shows the environments tfgpu-install built.",
                ],
            )
        if facts.site_packages is not None:
            facts.python_version = facts.site_packages.parent.name.removeprefix("python")
    site = facts.site_packages
    if site is None or not site.is_dir():
        return facts
    for dist_info in sorted(site.glob("*.dist-info")):
        name = dist_info.name.split("-")[0].lower()
        if name in TF_DISTRIBUTIONS and (dist_info / "METADATA").is_file():
            text = untrusted.text_or_none(dist_info / "METADATA", untrusted.ENV_FILE, errors="replace") or ""
            match = re.search(r"^Version:\s*(\S+)", text, re.M)
            facts.tf_distribution, facts.tf_version = name.replace("_", "-"), match.group(1) if match else None
            break
    for candidate in ("tensorflow/python/platform/build_info.py", "tensorflow_core/python/platform/build_info.py"):
        if (site / candidate).is_file():
            facts.build_info = parse_build_info(
                untrusted.text_or_none(site / candidate, untrusted.ENV_FILE, errors="replace") or ""
            )
            facts.build_sources = {key: candidate for key in facts.build_info}
            break
    read_headers(facts, site)
    framework = site / "tensorflow" / "libtensorflow_framework.so.2"
    if not framework.is_file() and os.path.lexists(framework):
        facts.reads.dynamic(framework)  # a FIFO, a directory, a link loop: said "not read", never passed over
    if framework.is_file():
        facts.framework = framework
        dynamic = facts.reads.dynamic(framework)
        origin = str(framework.parent)
        facts.runpath = tuple(
            p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for p in (dynamic.runpath if dynamic else ())
        )
    hook = site / "_tfgpu_cuda_hook.py"
    facts.hook = hook if hook.is_file() and (site / "_tfgpu_cuda_hook.pth").is_file() else None
    activation = facts.root / "etc" / "tfgpu" / "activate.sh"
    facts.activation = activation if activation.is_file() else None

    facts.marker = marker.read(facts.root)  # the marker's one reader: a wrong-typed field reads as missing
    return facts
