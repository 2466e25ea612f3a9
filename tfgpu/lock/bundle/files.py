"""The files every bundle carries besides its lock and packages: ``install.sh`` and tfgpu-install's
own wheel (built from the source tree when running from a checkout, else rebuilt from the installed
files). Each kind of bundle writes its own README (``pip_bundle.py``, ``conda_bundle.py``).
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
import zipfile
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

import tfgpu
from tfgpu.doors import quoting, untrusted
from tfgpu.engines.download import file_digest
from tfgpu.engines.uv import build_wheel
from tfgpu.errors import OperationError
from tfgpu.lock.resolving import index_url


def digest(path: Path) -> str:
    """The sha256 of a file."""
    return file_digest(path)


def source_checkout() -> Path | None:
    """The source checkout the running code is (an editable install: ``pip install -e .``), or None.
    Found from the package, not from this module's depth, so moving this module cannot break it."""
    root = Path(tfgpu.__file__).resolve().parents[1]
    text = untrusted.text_or_none(root / "pyproject.toml", untrusted.CACHE) or ""
    return root if 'name = "tfgpu-install"' in text else None


def tool_wheel(dest: Path, *, runner, uv: str, cache_dir: Path) -> tuple[Path, list[str]]:
    """tfgpu-install's wheel in ``dest`` and its runtime requirements (``Requires-Dist`` without extras).

    From a checkout (``pip install -e``, or running the source tree) the wheel is built with
    ``uv build``; from any installed copy (``pip install .``, a wheel, the tool env of a bundle's
    ``install.sh``) it is rebuilt from the installed files, each checked against the installation's
    RECORD first. Nothing is downloaded: the wheel is the code that is running."""
    dest.mkdir(parents=True, exist_ok=True)
    root = source_checkout()
    with tempfile.TemporaryDirectory(prefix="tfgpu-tool-") as tmp:
        if root is not None:
            done = runner.run(build_wheel(uv, root, Path(tmp), index=index_url(), cache=cache_dir))
            built = sorted(Path(tmp).glob("tfgpu_install-*.whl"))
            if done.returncode != 0 or not built:
                raise OperationError(
                    "bundle-tool-wheel",
                    f"Could not build tfgpu-install's own wheel from {root}:\n{done.tail()}",
                    [
                        f"The whole output is in {runner.log_path}.",
                        "Or set TFGPU_BUNDLE_TOOL=0 to leave the tool out (install.sh then needs "
                        "tfgpu-install on the target's PATH).",
                    ],
                )
            wheel = built[0]
        else:
            wheel = wheel_from_installation(Path(tmp))
            runner.log(f"tfgpu-install's wheel rebuilt from its installed files: {wheel.name}")
        target = dest / wheel.name
        target.write_bytes(untrusted.read_bytes(wheel, untrusted.ARTIFACT))
    with zipfile.ZipFile(target) as archive:
        meta_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(archive.read(meta_name).decode("utf-8"))
    requires = [req for req in metadata.get_all("Requires-Dist") or [] if "extra ==" not in req]
    return target, requires


_NOT_IN_WHEEL = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


def wheel_from_installation(out_dir: Path) -> Path:
    """The wheel of the installed tfgpu-install that is running, rebuilt from its files (every one
    checked against the RECORD the installer wrote), with a fresh RECORD."""

    def refuse(problem: str) -> OperationError:
        return OperationError(
            "bundle-tool-wheel",
            f"Cannot rebuild tfgpu-install's own wheel: {problem}.",
            [
                "Reinstall tfgpu-install (`pip install --force-reinstall tfgpu-install`), or run "
                "`bundle` from a checkout of its source.",
                "Or set TFGPU_BUNDLE_TOOL=0 to leave the tool out (install.sh then needs "
                "tfgpu-install on the target's PATH).",
            ],
        )

    try:
        dist = metadata.distribution("tfgpu-install")
    except metadata.PackageNotFoundError:
        raise refuse("no installed distribution named tfgpu-install was found") from None
    running = Path(tfgpu.__file__).resolve()
    if Path(str(dist.locate_file("tfgpu/__init__.py"))).resolve() != running or not dist.files:
        raise refuse(f"the code running ({running.parent}) is not the installed distribution's")
    info = next((p.parts[0] for p in dist.files if p.parts[0].endswith(".dist-info")), None)
    members: dict[str, bytes] = {}
    for item in sorted(dist.files, key=str):
        name = item.as_posix()
        if (
            name.startswith("..")
            or "__pycache__" in item.parts
            or name.endswith(".pyc")
            or (item.parts[0] == info and item.name in _NOT_IN_WHEEL)
        ):
            continue
        if item.parts[0] not in ("tfgpu", info):
            continue
        data = untrusted.read_bytes(Path(str(dist.locate_file(item))), untrusted.PACKAGE_DATA)
        if item.hash is not None:
            found = base64.urlsafe_b64encode(hashlib.new(item.hash.mode, data).digest()).rstrip(b"=").decode()
            if found != item.hash.value:
                raise refuse(f"{name} differs from what was installed (its RECORD hash)")
        members[name] = data
    if info is None or f"{info}/METADATA" not in members or "tfgpu/__init__.py" not in members:
        raise refuse("its RECORD does not list the package and its metadata")
    record = [
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
        for name, data in members.items()
    ]
    members[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    tag = next(
        (
            line.split(":", 1)[1].strip()
            for line in members.get(f"{info}/WHEEL", b"").decode().splitlines()
            if line.startswith("Tag:")
        ),
        "py3-none-any",
    )
    target = out_dir / f"{info.removesuffix('.dist-info')}-{tag}.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return target


def install_script(python: str, tool_version: str, tensorflow: str, platform: str) -> str:
    """``install.sh``: a venv for the tool from ``tool/``, then ``create --from-bundle``."""
    q = quoting.sh
    return f"""#!/usr/bin/env bash
# Offline install of this tfgpu-install bundle: TensorFlow {tensorflow}, Python {python}, {platform}.
# Usage: ./install.sh PREFIX [more `tfgpu-install create` options, e.g. --no-verify or --require-gpu]
set -euo pipefail

if [ "$#" -lt 1 ]; then
    echo "usage: $0 PREFIX [tfgpu-install create options]" >&2
    exit 2
fi
prefix=$1
shift
bundle=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
want={q(python)}
tool_version={q(tool_version)}

# The interpreter: TFGPU_PYTHON, else python$want, else python3. Each candidate is run before it is
# trusted: `command -v` also finds a broken pyenv shim or a stale link, which fails only when run,
# and a shim that hangs (a network home, a shim waiting for input) is given up on after
# TFGPU_PYTHON_TIMEOUT seconds (default 60) where `timeout` exists, with stdin closed either way.
version_of() {{
    if command -v timeout >/dev/null 2>&1; then
        timeout "${{TFGPU_PYTHON_TIMEOUT:-60}}" "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
            </dev/null 2>/dev/null
    else
        "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' </dev/null 2>/dev/null
    fi
}}
python=
tried=()
if [ -n "${{TFGPU_PYTHON:-}}" ]; then
    candidates=("$TFGPU_PYTHON")
else
    candidates=("python$want" python3)
fi
for candidate in "${{candidates[@]}}"; do
    found=$(command -v "$candidate" 2>/dev/null || true)
    if [ -z "$found" ]; then
        tried+=("$candidate: not found")
        continue
    fi
    status=0
    have=$(version_of "$found") || status=$?
    if [ "$status" = 124 ]; then
        tried+=("$found: did not answer within ${{TFGPU_PYTHON_TIMEOUT:-60}} seconds")
    elif [ "$status" != 0 ]; then
        tried+=("$found: does not run (exit $status)")
    elif [ "$have" != "$want" ]; then
        tried+=("$found: Python $have")
    else
        python=$found
        break
    fi
done
if [ -z "$python" ]; then
    echo "error: this bundle needs Python $want, and no working one was found:" >&2
    printf '  %s\n' "${{tried[@]}}" >&2
    echo "Install Python $want, or set TFGPU_PYTHON=/path/to/python$want." >&2
    exit 3
fi

if compgen -G "$bundle/tool/tfgpu_install-*.whl" >/dev/null; then
    data=${{XDG_DATA_HOME:-$HOME/.local/share}}
    tool_env=${{TFGPU_TOOL_ENV:-$data/tfgpu-install/tool-$tool_version-py$want}}
    if [ ! -x "$tool_env/bin/tfgpu-install" ]; then
        # uv from the bundle's own uv wheel: no pip, no ensurepip (Debian/Ubuntu Pythons often lack
        # python3-venv), no network. Without a uv wheel, the stdlib venv and its pip.
        uv_wheel=$(compgen -G "$bundle/tool/uv-*.whl" | head -n 1 || true)
        if [ -n "$uv_wheel" ]; then
            uv_dir=$(mktemp -d)
            trap 'rm -rf "$uv_dir"' EXIT
            "$python" - "$uv_wheel" "$uv_dir/uv" <<'TFGPU_UV'
import os, sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
name = next(n for n in wheel.namelist() if n.endswith("/scripts/uv"))
with open(sys.argv[2], "wb") as out:
    out.write(wheel.read(name))
os.chmod(sys.argv[2], 0o755)
TFGPU_UV
            "$uv_dir/uv" venv --quiet --python "$python" --no-python-downloads "$tool_env"
            # --compile-bytecode: without .pyc files the tool compiles its modules when it starts, and
            # on every start where the env is not writable by the user (a tool env made by root).
            "$uv_dir/uv" pip install --quiet --python "$tool_env/bin/python" --offline --no-index \\
                --no-config --compile-bytecode --find-links "$bundle/tool" "tfgpu-install==$tool_version"
            rm -rf "$uv_dir"
            trap - EXIT
        else
            "$python" -m venv "$tool_env"
            "$tool_env/bin/python" -m pip install --isolated --no-index --find-links "$bundle/tool" \\
                --disable-pip-version-check --quiet --compile "tfgpu-install==$tool_version"
        fi
    fi
    tool=$tool_env/bin/tfgpu-install
else
    tool=$(command -v tfgpu-install || true)
    if [ -z "$tool" ]; then
        echo "error: this bundle carries no tfgpu-install wheels and there is none on PATH." >&2
        exit 3
    fi
fi
exec "$tool" create --from-bundle "$bundle" --prefix "$prefix" "$@"
"""
