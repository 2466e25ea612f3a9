# Sets up a venv's CUDA libraries exactly as tfgpu-install does: the code below is tfgpu-install's
# own activation module (tfgpu/envs/activation.py) and its templates, embedded when this
# script was generated. Files are rewritten only when their content differs (idempotent).
import json
import os
import sys
import types
from pathlib import Path

ACTIVATION_SOURCE = "@ACTIVATION_SOURCE@"
TEMPLATES = "@TEMPLATES@"

root = Path(sys.argv[1])
changed = []
_write_text = Path.write_text
_pending_unlink = {}


def write_text(self, data, encoding=None, errors=None, newline=None):
    try:
        if self.read_text(encoding=encoding or "utf-8") == data:
            return len(data)
    except OSError:
        pass
    changed.append(str(self))
    return _write_text(self, data, encoding=encoding, errors=errors, newline=newline)


def unlink(self, missing_ok=False):
    # Deferred to symlink_to: relinking to the same target is then a no-op.
    _pending_unlink[str(self)] = os.readlink(self) if self.is_symlink() else None


def symlink_to(self, target, target_is_directory=False):
    old = _pending_unlink.pop(str(self), None)
    if old is not None and old == str(target):
        return
    if os.path.lexists(self):
        os.unlink(self)
    changed.append(str(self))
    os.symlink(str(target), str(self))


Path.write_text, Path.unlink, Path.symlink_to = write_text, unlink, symlink_to
module = types.ModuleType("tfgpu_activation")
sys.modules[module.__name__] = module
exec(compile(json.loads(ACTIVATION_SOURCE), "tfgpu/envs/activation.py", "exec"), module.__dict__)
templates = json.loads(TEMPLATES)
module._template = templates.__getitem__
found = sorted(root.glob("lib/python3*/site-packages"))
if not found:
    sys.exit("no site-packages under %s" % root)
site = str(found[0].relative_to(root))
layout = module.read_layout(root, site)
module.write_venv_activation(root, layout)
print(json.dumps({"changed": changed, "preload": len(layout.preload), "lib_dirs": list(layout.lib_dirs)}))
