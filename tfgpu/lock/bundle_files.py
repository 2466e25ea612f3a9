"""The files a bundle carries besides wheels: its README, ``install.sh``, and tfgpu-install's own
wheel (built from the source tree when running from a checkout, else downloaded from the index).
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

from tfgpu import __version__
from tfgpu.errors import OperationError
from tfgpu.lock import pip_lock


def digest(path: Path) -> str:
    """The sha256 of a file."""
    from tfgpu.engines.download import file_digest

    return file_digest(path)


def tool_wheel(dest: Path, *, runner, uv: str, cache_dir: Path) -> tuple[Path, list[str]]:
    """tfgpu-install's wheel in ``dest`` and its runtime requirements (``Requires-Dist`` without extras)."""
    dest.mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="tfgpu-tool-") as tmp:
        if (root / "pyproject.toml").is_file() and 'name = "tfgpu-install"' in (root / "pyproject.toml").read_text(encoding="utf-8"):
            argv = [uv, "build", "--wheel", "--out-dir", tmp, str(root), "--no-config", "--no-python-downloads",
                    "--default-index", pip_lock.index_url(), "--cache-dir", str(cache_dir), "--quiet"]
        else:  # an installed tfgpu-install: the same version from the index
            argv = [sys.executable, "-m", "pip", "download", "--isolated", "--no-deps", "--only-binary", ":all:",
                "--index-url", pip_lock.index_url(), "--dest", tmp, f"tfgpu-install=={__version__}"]
        done = runner.run(argv)
        built = sorted(Path(tmp).glob("tfgpu_install-*.whl"))
        if done.returncode != 0 or not built:
            raise OperationError("bundle-tool-wheel", f"Could not get tfgpu-install's own wheel:\n{done.tail()}",
                                 [f"The whole output is in {runner.log_path}.",
                                  "Or set TFGPU_BUNDLE_TOOL=0 to leave the tool out (install.sh then needs "
                                  "tfgpu-install on the target's PATH)."])
        target = dest / built[0].name
        target.write_bytes(built[0].read_bytes())
    with zipfile.ZipFile(target) as archive:
        meta_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(archive.read(meta_name).decode("utf-8"))
    requires = [req for req in metadata.get_all("Requires-Dist") or [] if "extra ==" not in req]
    return target, requires


def readme(meta: dict, lock_name: str, wheels: int) -> str:
    """The bundle's README.md."""
    r = meta["resolution"]
    return f"""# Offline TensorFlow bundle (tfgpu-install {__version__})

TensorFlow {r['tensorflow']} with CUDA {r['cuda']} and cuDNN {r['cudnn']} (pip wheels) for {meta['platform']},
Python {meta['python']}. The target needs an NVIDIA driver >= {r['min_driver']}, Python {meta['python']}
and no network (`install.sh` uses the bundle's own uv, so Python's `venv`/`ensurepip` are not needed).

## Install

    ./install.sh /path/to/env            # makes a venv for tfgpu-install from tool/, then:
    tfgpu-install create --from-bundle . --prefix /path/to/env

`install.sh` takes Python from `TFGPU_PYTHON`, else `python{meta['python']}`, else `python3`; it keeps
tfgpu-install in `~/.local/share/tfgpu-install/tool-{__version__}-py{meta['python']}` (`TFGPU_TOOL_ENV` overrides).
Extra arguments go to `create` (for example `--no-verify`, `--force`, `--jupyter`).

Every file is checked against `bundle.json` before anything is installed; a missing or damaged
file stops the install (exit 3) with nothing changed. Then `{lock_name}` is installed exactly, with
every wheel checked against its sha256, and the environment is set up and verified as
`tfgpu-install create` does.

## Contents

- `{lock_name}`: the lock (`pip install --require-hashes -r {lock_name}` also accepts it);
  `pylock.{meta['platform']}.toml` is the same resolution in PEP 751 form.
- `wheels/`: the {wheels} wheels the lock names.
- `tool/`: tfgpu-install and its dependencies.
- `bundle.json`: every file's sha256 and size.

Regenerate: `{pip_lock.regenerate_command(meta, 'DIR').replace(' lock ', ' bundle ').replace(' --no-detect', '')}`
"""


def install_script(python: str, tool_version: str, tensorflow: str, platform: str) -> str:
    """``install.sh``: a venv for the tool from ``tool/``, then ``create --from-bundle``."""
    q = shlex.quote
    return f"""#!/usr/bin/env bash
# Offline install of this tfgpu-install bundle: TensorFlow {tensorflow}, Python {python}, {platform}.
# Usage: ./install.sh PREFIX [more `tfgpu-install create` options, e.g. --no-verify]
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

python=${{TFGPU_PYTHON:-}}
if [ -z "$python" ]; then
    for candidate in "python$want" python3; do
        if command -v "$candidate" >/dev/null 2>&1; then
            python=$(command -v "$candidate")
            break
        fi
    done
fi
if [ -z "$python" ]; then
    echo "error: this bundle needs Python $want, and none was found (set TFGPU_PYTHON)." >&2
    exit 3
fi
have=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "$want" ]; then
    echo "error: this bundle is for Python $want, but $python is Python $have (set TFGPU_PYTHON)." >&2
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
            "$uv_dir/uv" pip install --quiet --python "$tool_env/bin/python" --offline --no-index \\
                --no-config --find-links "$bundle/tool" "tfgpu-install==$tool_version"
            rm -rf "$uv_dir"
            trap - EXIT
        else
            "$python" -m venv "$tool_env"
            "$tool_env/bin/python" -m pip install --isolated --no-index --find-links "$bundle/tool" \\
                --disable-pip-version-check --quiet "tfgpu-install==$tool_version"
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
