# Sets up a venv's CUDA libraries exactly as tfgpu-install does: it runs tfgpu-install's own
# activation module (tfgpu/envs/activation.py) with its templates, which the generated script
# wrote beside this file. Usage: python activate_env.py ENV_PREFIX FILES_DIR. Files in the env
# are rewritten only when their content differs (idempotent: a second run changes nothing).
import json
import os
import stat
import sys
import types
from pathlib import Path

root, files = Path(sys.argv[1]), Path(sys.argv[2])
changed = []  # type: list[str]
templates = {
    name: (files / name).read_text(encoding="utf-8") for name in ("activate.sh", "activate.fish", "cuda_hook.py")
}

# The activation module writes through tfgpu-install's doors (tfgpu.envs.writes, tfgpu.doors.untrusted),
# which the target does not have: these stand-ins keep the doors' promises that matter here
# (whole files renamed into place, a link out of the env never read through, nothing rewritten
# that already holds the same bytes) and record what changed.


def _inside(path, env):
    real, top = os.path.realpath(path), os.path.realpath(env)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def read_own(path, env):
    if not _inside(path, env):
        sys.exit("%s links out of the env: nothing was read through it" % path)
    try:
        with open(os.path.realpath(path), "rb") as handle:
            return handle.read(), os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return None


def _ready(path, root=None):
    """Like tfgpu.envs.writes' env-path-blocked: a directory, FIFO or socket where a file or link
    goes (or where its temporary goes) stops the script with a way forward, never a traceback; like
    its repair-path-outside, a directory that links out of ``root`` (the env) gets nothing written."""
    if root is not None and not _inside(os.path.dirname(str(path)), root):
        sys.exit("%s leads outside %s (through a symbolic link): nothing was written there" % (path, root))
    for where in (str(path), "%s.tfgpu-tmp" % path):
        try:
            info = os.lstat(where)
        except FileNotFoundError:
            continue
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            sys.exit("%s is in the way: a file or link goes there, and something that is neither is there "
                     "now. Move it aside (mv %s %s.saved), then run this script again." % (where, where, where))


def put_text(path, text, mode=None, root=None):
    _ready(path, root)
    data = text.encode("utf-8")
    if not os.path.islink(path) and os.path.isfile(path):
        with open(path, "rb") as handle:
            if handle.read() == data and (mode is None or os.stat(path).st_mode & 0o7777 == mode):
                return path
    partial = "%s.tfgpu-tmp" % path
    with open(partial, "wb") as handle:
        handle.write(data)
    if mode is not None:
        os.chmod(partial, mode)
    os.replace(partial, path)
    changed.append(str(path))
    return path


def put_link(path, target, root=None):
    _ready(path, root)
    if os.path.islink(path) and os.readlink(path) == str(target):
        return path
    partial = "%s.tfgpu-tmp" % path
    if os.path.lexists(partial):
        os.unlink(partial)
    os.symlink(str(target), partial)
    os.replace(partial, path)
    changed.append(str(path))
    return path


def make_dirs(path, root=None):
    if root is not None and not _inside(path, root):  # realpath resolves the part that exists
        sys.exit("%s leads outside %s (through a symbolic link): nothing was written there" % (path, root))
    os.makedirs(path, exist_ok=True)


for name, members in (("tfgpu", {}), ("tfgpu.envs", {}), ("tfgpu.doors", {}),
                      ("tfgpu.envs.writes", {"read_own": read_own, "put_text": put_text, "put_link": put_link,
                                             "make_dirs": make_dirs}),
                      ("tfgpu.doors.untrusted", {"package_text": lambda *parts: templates[parts[-1]]})):
    stand_in = types.ModuleType(name)
    stand_in.__dict__.update(members)
    sys.modules[name] = stand_in
vars(sys.modules["tfgpu"]).update(envs=sys.modules["tfgpu.envs"], doors=sys.modules["tfgpu.doors"])
vars(sys.modules["tfgpu.doors"]).update(untrusted=sys.modules["tfgpu.doors.untrusted"])
vars(sys.modules["tfgpu.envs"]).update(writes=sys.modules["tfgpu.envs.writes"])
module = types.ModuleType("tfgpu_activation")
sys.modules[module.__name__] = module
source = (files / "activation.py").read_text(encoding="utf-8")
exec(compile(source, "tfgpu/envs/activation.py", "exec"), module.__dict__)
vars(module)["_template"] = templates.__getitem__
found = sorted(root.glob("lib/python3*/site-packages"))
if not found:
    sys.exit("no site-packages under %s" % root)
site = str(found[0].relative_to(root))
rows = files / "dlopened.json"  # the names CUDA libraries dlopen themselves, provided inside the env
dlopened = tuple(json.loads(rows.read_text(encoding="utf-8"))) if rows.is_file() else ()
layout = module.read_layout(root, site, dlopened)
# read_layout leaves out a dlopen link that is already in place. The links an earlier run made
# (layout.json lists them) that are still there as it made them stay in the layout, so that a run
# again (after a failed GPU check, say) writes the same layout.json: nothing changes.
recorded, kept = read_own(root / "etc" / "tfgpu" / "layout.json", root), []
try:
    kept = [(str(path), str(target)) for path, target in json.loads(recorded[0])["links"]] if recorded else []
except (ValueError, KeyError, TypeError):
    kept = []
kept = [(path, target) for path, target in kept
        if _inside(os.path.dirname(str(root / path)), root) and os.path.islink(root / path)
        and os.readlink(root / path) == target]
if kept:
    import dataclasses
    layout = dataclasses.replace(layout, links=tuple(dict.fromkeys([*kept, *map(tuple, layout.links)])))
module.write_venv_activation(root, layout)
print(json.dumps({"changed": changed, "preload": len(layout.preload), "lib_dirs": list(layout.lib_dirs),
                  "links": len(layout.links)}))
