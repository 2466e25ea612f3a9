"""``tfgpu-install lock --check FILE``: is this lock still what its recorded inputs resolve to?

Three questions, each answered from what the lock itself records (nothing is written):

* **inputs**: this tool, asked for the lock's target again (its TensorFlow, mode, Python and
  platform), would it lock the same requirements? (``inputs_sha256`` of a pip lock, the
  ``content_hash`` of each platform of a conda lock.) A newer tool whose data changed a pin or an
  extra answers no.
* **packages**: re-resolving the recorded inputs against the recorded index or channels, does
  the same set come out, version for version and hash for hash? A new release inside one of
  TensorFlow's ranges, or a re-uploaded file, answers no.
* **wanted**: when a project file (or selectors on the command line) says what the team wants,
  does the lock still match it?

The answer is a :class:`Check`: ``current`` and the list of changes, one sentence each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tfgpu.errors import ImpossibleError, OperationError
from tfgpu.lock.platforms import parse_platform
from tfgpu.requirements import canonical


@dataclass
class Check:
    path: Path
    mode: str
    platforms: list[str]
    tensorflow: str
    python: str
    changes: list[dict] = field(default_factory=list)
    packages: int = 0

    @property
    def current(self) -> bool:
        return not self.changes

    def add(self, kind: str, text: str, **details) -> None:
        self.changes.append({"kind": kind, "text": text, **details})

    def to_dict(self) -> dict:
        return {"lock": str(self.path), "mode": self.mode, "platforms": self.platforms, "tensorflow": self.tensorflow,
                "python": self.python, "current": self.current, "packages": self.packages, "changes": self.changes}


def check_lock(path: str | Path, wanted: dict | None = None, reporter=None) -> Check:
    """Check ``path`` (a pip lock or a conda-lock.yml); ``wanted``: selectors it should still match
    (``tf``, ``mode``, ``python``, ``platform``; from the project file or the command line)."""
    from tfgpu.lock.install import read_lock

    lock = read_lock(path)  # refuses an edited, truncated or foreign lock first (exit 2/3)
    if Path(lock.path).suffix in (".yml", ".yaml"):
        found = _check_conda(lock, reporter)
    else:
        found = _check_pip(lock, reporter)
    _check_wanted(found, wanted or {})
    return found


def _target(tensorflow: str, mode: str, python: str, os_name: str, platform: str, cpu_only: bool,
            tf_source: str | None = None):
    """The resolution this tool gives the lock's target today (``(platform, resolution, cpu_only)``)."""
    from tfgpu.lock.targets import lock_targets

    [target] = lock_targets([platform], {"tf": tensorflow, "mode": mode, "python": python, "os": os_name,
                                         "tf_source": tf_source}, allow_cpu=cpu_only, host=None)
    return target


def _check_pip(lock, reporter) -> Check:
    from tfgpu.lock import pip_lock
    from tfgpu.lock.writing import tools

    meta, recorded = lock.meta, lock.meta["resolution"]
    found = Check(Path(lock.path), "pip", [meta["platform"]], recorded["tensorflow"], meta["python"])
    platform = parse_platform(meta["platform"])
    requirements = [canonical(text, what=f"The lock {lock.path}") for text in recorded["requirements"]]
    old = pip_lock.lock_inputs(requirements, meta["python"], meta["python_platform"], meta["index"])
    try:
        _, resolution, _ = _target(recorded["tensorflow"], "pip", meta["python"], recorded["os"], platform.name,
                                   meta["cpu_only"])
        new = pip_lock.lock_inputs(list(resolution.packages.pip), resolution.python, platform.uv, meta["index"])
        if pip_lock.inputs_digest(new) != meta["inputs_sha256"]:
            _input_changes(found, old, new)
    # Only "no longer resolves" is a change; a record the parsers refuse (UsageError) ends the check.
    except (ImpossibleError, OperationError) as error:
        found.add("inputs", f"this tfgpu-install no longer resolves TF {recorded['tensorflow']} for "
                            f"{platform.name}: {error.message}", code=error.code)
    if reporter is not None:
        reporter.note(f"re-resolving {len(old['requirements'])} requirements for {platform.name} against "
                      f"{meta['index']}")
    runner, uv, cache = tools("lock-check")
    body, _ = pip_lock.compile_pins(old["requirements"], platform, meta["python"], runner=runner, uv=uv,
                                    cache_dir=cache, index=meta["index"], refresh=True,
                                    with_pylock=False)
    before, after = _pinned(lock.body), _pinned(body)
    found.packages = len(before)
    _package_changes(found, platform.name, before, after)
    return found


def _pinned(body: str) -> dict[str, tuple[str, frozenset]]:
    """``{name: (version, hashes)}`` of a hashed requirements body."""
    found, name = {}, None
    for line in body.splitlines():
        pin = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s\\;]+)", line)
        if pin:
            name = pin.group(1).lower().replace("_", "-")
            found[name] = (pin.group(2), frozenset())
        for digest in re.findall(r"--hash=sha256:([0-9a-f]{64})", line):
            if name is not None:
                found[name] = (found[name][0], found[name][1] | {digest})
    return found


def _package_changes(found: Check, platform: str, before: dict, after: dict) -> None:
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old is None:
            found.add("package", f"{platform}: {name} {new[0]} would be added", platform=platform, package=name,
                      locked=None, now=new[0])
        elif new is None:
            found.add("package", f"{platform}: {name} {old[0]} would be dropped", platform=platform, package=name,
                      locked=old[0], now=None)
        elif old[0] != new[0]:
            found.add("package", f"{platform}: {name} {old[0]} -> {new[0]}", platform=platform, package=name,
                      locked=old[0], now=new[0])
        elif old[1] != new[1]:
            found.add("package", f"{platform}: {name} {old[0]}: its files' sha256 differ now (re-uploaded?)",
                      platform=platform, package=name, locked=old[0], now=new[0])


def _input_changes(found: Check, old: dict, new: dict) -> None:
    for key in sorted(set(old) | set(new)):
        if old.get(key) == new.get(key):
            continue
        if isinstance(old.get(key), list) and isinstance(new.get(key), list):
            added = [item for item in new[key] if item not in old[key]]
            dropped = [item for item in old[key] if item not in new[key]]
            text = "; ".join([*(f"+ {item}" for item in added), *(f"- {item}" for item in dropped)])
        else:
            text = f"{old.get(key)!r} -> {new.get(key)!r}"
        found.add("inputs", f"{key} would be locked differently by this tfgpu-install: {text}", input=key,
                  locked=old.get(key), now=new.get(key))


def _check_conda(lock, reporter) -> Check:
    from tfgpu.engines import rattler
    from tfgpu.lock import conda_lock
    from tfgpu.lock.writing import tools
    from tfgpu.paths import cache_root

    metadata = lock.lockfile.metadata
    platforms = list(metadata.platforms)
    channels = list(lock.channels())
    first = lock.resolution(platforms[0])
    found = Check(Path(lock.path), "conda", platforms, first["tensorflow"], first["python"])
    runner, uv, _ = tools("lock-check")
    for name in platforms:
        recorded = lock.resolution(name)
        platform = parse_platform(name)
        old_inputs = {"format": conda_lock.FORMAT, "specs": recorded["conda_specs"], "pip": recorded["requirements"],
                      "channels": channels, "cuda": recorded["virtual_cuda"],
                      "glibc": rattler.GLIBC if name.startswith("linux") else None}
        try:
            # A locked conda spec of tensorflow itself: the lock took conda-forge's build, and is checked as such.
            source = "conda-forge" if any(str(spec).split()[0] == "tensorflow" for spec in recorded["conda_specs"]) else None
            _, resolution, cpu_only = _target(recorded["tensorflow"], "conda", recorded["python"], recorded["os"], name,
                                              recorded["cpu_only"], source)
        except (ImpossibleError, OperationError) as error:
            found.add("inputs", f"this tfgpu-install no longer resolves TF {recorded['tensorflow']} for {name}: "
                                f"{error.message}", code=error.code)
            continue
        if reporter is not None:
            reporter.note(f"re-solving {name} from {', '.join(channels)}")
        entries, inputs = conda_lock.lock_platform(platform, resolution, cpu_only, channels, runner=runner, uv=uv,
                                                   cache=cache_root(), cuda=recorded["virtual_cuda"])
        if conda_lock.inputs_digest(inputs) != metadata.content_hash.get(name):
            new = dict(inputs)
            _input_changes(found, old_inputs, new)
            if conda_lock.inputs_digest(old_inputs) != metadata.content_hash.get(name):
                found.add("inputs", f"{name}: the recorded content_hash does not match the recorded inputs")
        before = {(p.manager, str(p.name)): (str(p.version), frozenset({p.hash.sha256 or ""}))
                  for p in lock.lockfile.package if p.platform == name}
        after = {(e["manager"], e["name"]): (e["version"], frozenset({e["hash"].get("sha256", "")})) for e in entries}
        found.packages += len(before)
        _package_changes(found, name, {f"{m}:{n}": v for (m, n), v in before.items()},
                         {f"{m}:{n}": v for (m, n), v in after.items()})
    return found


def _check_wanted(found: Check, wanted: dict) -> None:
    """Changes where the project (or the command line) now asks for something the lock is not."""
    from tfgpu.lock.selectors import tf_agrees

    source = wanted.get("source", "the command line")
    if wanted.get("tf") and not tf_agrees(wanted["tf"], found.tensorflow):
        found.add("wanted", f"{source} asks for --tf {wanted['tf']}; the lock has TensorFlow {found.tensorflow}")
    if wanted.get("mode") and wanted["mode"] != found.mode:
        found.add("wanted", f"{source} asks for --mode {wanted['mode']}; this is a {found.mode} lock")
    if wanted.get("python") and wanted["python"] != found.python:
        found.add("wanted", f"{source} asks for --python {wanted['python']}; the lock is for Python {found.python}")
    if wanted.get("platform") and sorted(set(wanted["platform"])) != sorted(set(found.platforms)):
        found.add("wanted", f"{source} asks for platforms {', '.join(wanted['platform'])}; the lock has "
                            f"{', '.join(found.platforms)}")
