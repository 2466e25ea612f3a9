"""Checks of an env holding more than one CUDA stack (TensorFlow's CUDA 12 wheels next to torch's
or JAX's CUDA 13 wheels), read as files through :mod:`tfgpu.doctor.ownership`; nothing is imported.

- ``mixed.shared-files``: paths two distributions own; where their bytes differ, which one's are on
  disk (won) and which lost;
- ``mixed.sonames``: SONAMEs the stacks ship in different files (the loader reuses the first loaded);
- ``mixed.python-numpy``: the interpreter and numpy against every framework's requirements;
- ``mixed.apart``: in an env built with TensorFlow's CUDA wheels apart, that they are there, intact.

They report only where there is something mixed: an env with one stack, no file owned twice and
one framework gets no ``mixed.*`` finding at all.
"""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from tfgpu.doctor import ownership
from tfgpu.doctor.findings import Finding, fail, ok, warn
from tfgpu.doctor.reads import RunReads

EVIDENCE_LIMIT = 12
"""Evidence lines per finding: NCCL alone shares ~70 header files; the count says how many more."""


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= EVIDENCE_LIMIT:
        return lines
    return [*lines[:EVIDENCE_LIMIT], f"... and {len(lines) - EVIDENCE_LIMIT} more"]


def _reads(env) -> RunReads:
    """The run's reader (each library read once, hashing bounded); a fresh one for an env read elsewhere."""
    return getattr(env, "reads", None) or RunReads()


def check(env) -> list[Finding]:
    site = env.site_packages
    if site is None or not site.is_dir():
        return []
    reads = _reads(env)
    dists = ownership.distributions(site)
    stacks = ownership.stacks(dists)
    shared = ownership.shared_files(site, dists, reads)
    findings = apart(env)
    if len(stacks) > 1 or shared:
        findings.append(shared_files(env, shared, stacks))
    if len(stacks) > 1:
        findings.append(sonames(env, ownership.soname_pairs(site, dists, reads), stacks))
    return findings + python_numpy(env)


def apart(env) -> list[Finding]:
    """An env built with TensorFlow's CUDA wheels apart (the marker's ``cuda_apart``): that directory's
    distributions are there and their libraries hold the bytes their RECORDs list."""
    kept = env.marker.apart_dir if env.marker is not None else None
    if kept is None:
        return []
    # The marker is the env's file: its dir is only ever stacks.APART, never a path out of the env.
    if not re.fullmatch(r"lib/tfgpu/cuda[0-9]{1,3}", kept):
        return [
            fail(
                "mixed.apart",
                f"The env's marker names {kept[:100]!r} as where TensorFlow's CUDA wheels are kept apart",
                f"Rebuild the env: tfgpu-install create --force --prefix {env.root} --tf {env.tf_version or 'latest'}",
            )
        ]
    where = env.root / kept
    dists = ownership.distributions(where) if where.is_dir() else []
    reads, changed, unchecked = _reads(env), [], []
    for dist in dists:
        for path, digest in dist.files.items():
            if ".so" not in path or not digest or not ownership.inside(where, path):
                continue
            size = dist.sizes.get(path)
            hashed = reads.hash(where / path, {size} if size is not None else set())
            if hashed.skipped:
                unchecked.append(f"{path}: {hashed.skipped}")
            elif hashed.digest != digest:
                changed.append(f"{path}: its bytes are not {dist.label}'s")
    evidence = (f"{where}: {', '.join(d.label for d in dists) or 'no distribution'}",)
    if not dists or changed:
        return [
            fail(
                "mixed.apart",
                f"TensorFlow's CUDA wheels in {kept} are missing or changed",
                f"Rebuild the env with the same frameworks: tfgpu-install create --force --prefix {env.root} --tf "
                f"{env.tf_version or 'latest'} (plus the other framework, as it was created)",
                *_capped(changed),
                *evidence,
            )
        ]
    if unchecked:
        return [
            warn(
                "mixed.apart",
                f"{len(unchecked)} of TensorFlow's CUDA libraries in {kept} were not checked",
                f"Check them by hand (`sha256sum`) against their RECORD, or rebuild the env: tfgpu-install create "
                f"--force --prefix {env.root} --tf {env.tf_version or 'latest'}",
                *_capped(unchecked),
                *evidence,
            )
        ]
    return [ok("mixed.apart", f"TensorFlow's CUDA wheels are kept apart in {kept}", *evidence)]


def _stacks_line(stacks: dict[int, list[str]]) -> str:
    return "CUDA stacks: " + "; ".join(f"cu{major}: {', '.join(labels)}" for major, labels in stacks.items())


def _owners(item: ownership.SharedFile) -> str:
    return " and ".join(label for label, _ in item.owners)


def shared_files(env, shared: list[ownership.SharedFile], stacks: dict[int, list[str]]) -> Finding:
    unchecked = [f for f in shared if f.unchecked]
    lost = [f for f in shared if not f.unchecked and (f.differ or f.losers)]
    alike = [f for f in shared if f not in lost and f not in unchecked]
    # A file whose bytes were not compared is said so, never counted as alike or lost.
    not_checked = [f"{f.path}: owned by {_owners(f)}; {f.unchecked}" for f in unchecked]
    if lost:
        lines = []
        for item in lost:
            owners = _owners(item)
            if item.size is None:
                lines.append(f"{item.path}: owned by {owners}; missing on disk (an uninstall of one removed it)")
            else:
                won = f"{', '.join(item.winners)}'s bytes" if item.winners else "bytes of none of them"
                if not item.winners and item.on_disk is None:
                    won += f" (its size, {item.size:,} bytes, is none its RECORDs list)"
                lines.append(f"{item.path}: owned by {owners}; on disk: {won}; lost: {', '.join(item.losers)}")
        losers = sorted({label for item in lost for label in item.losers})
        return fail(
            "mixed.shared-files",
            f"{len(lost)} file(s) are owned by two distributions and hold only one's bytes",
            "Each stack needs its own copy, and one env's site-packages holds one: keep TensorFlow and the "
            "other framework in separate envs, or choose versions that share one CUDA stack (`tfgpu-install "
            "plan` shows TensorFlow's). Reinstalling the loser (`uv pip install --python "
            f"{env.python} --reinstall --no-deps {' '.join(label.replace(' ', '==') for label in losers)}`) "
            "only moves the loss to the other one.",
            *_capped(lines + not_checked),
            *([f"and {len(alike)} more file(s) owned twice with the same bytes"] if alike else []),
            _stacks_line(stacks),
        )
    if unchecked:
        return warn(
            "mixed.shared-files",
            f"{len(unchecked)} file(s) owned by two distributions were not checked",
            "Compare them by hand (`sha256sum`) with their owners' RECORD rows; uninstalling either "
            "distribution deletes these files for the other.",
            *_capped(not_checked),
            *([f"and {len(alike)} more file(s) owned twice with the same bytes"] if alike else []),
            _stacks_line(stacks),
        )
    if alike:
        return warn(
            "mixed.shared-files",
            f"{len(alike)} file(s) are owned by two distributions (same bytes)",
            "Nothing is wrong now; uninstalling either distribution deletes these files for the other: "
            "reinstall the other afterwards (`uv pip install --reinstall --no-deps NAME==VERSION`).",
            *_capped([f"{f.path}: owned by {' and '.join(label for label, _ in f.owners)}" for f in alike]),
            _stacks_line(stacks),
        )
    return ok("mixed.shared-files", "No file is owned by two distributions", _stacks_line(stacks))


def sonames(env, pairs: list[ownership.SonamePair], stacks: dict[int, list[str]]) -> Finding:
    if not pairs:
        return ok("mixed.sonames", "The CUDA stacks share no SONAME in different files", _stacks_line(stacks))
    lines = [
        f"{pair.soname}: " + "; ".join(f"{stack} {path} ({label})" for stack, path, label in pair.files)
        for pair in pairs
    ]
    hooked = env.hook is not None
    return warn(
        "mixed.sonames",
        f"{len(pairs)} SONAME(s) exist once per CUDA stack: the first one loaded serves both frameworks",
        (
            "The env's load hook loads the other stack's copies before TensorFlow's (see docs/modes.md); "
            "import torch or JAX before TensorFlow where the hook is switched off."
            if hooked
            else "Import torch or JAX before TensorFlow, or add tfgpu-install's load hook "
            f"(`tfgpu-install repair --prefix {env.root}`), which loads the other stack's copies first."
        ),
        *_capped(lines),
    )


def _satisfies(version: str | None, spec: str) -> bool | None:
    if not version or not spec:
        return None
    try:
        return Version(version) in SpecifierSet(spec)
    except (InvalidVersion, InvalidSpecifier, ValueError):  # ValueError: a version of over 4,300 digits
        return None


def python_numpy(env) -> list[Finding]:
    """Python and numpy against each installed framework's Requires-Python and numpy requirement."""
    # Counted by their dist-info names before any METADATA is parsed: an env of one framework (the
    # usual one) gets no finding, and its requirements need not be read (packaging's parser is 30 ms).
    dist_infos = ownership.framework_dist_infos(env.site_packages)
    if len(dist_infos) < 2:
        return []
    found = ownership.frameworks(env.site_packages, dist_infos)
    numpy = ownership.installed_version(env.site_packages, "numpy")
    python = f"{env.python_version}.0" if env.python_version and env.python_version.count(".") == 1 else None
    evidence, broken = [], []
    for framework in found:
        python_ok = _satisfies(python, framework.requires_python)
        numpy_ok = _satisfies(numpy, framework.numpy)
        evidence.append(
            f"{framework.label}: Requires-Python {framework.requires_python or '-'}, numpy {framework.numpy or '-'}"
        )
        if python_ok is False:
            broken.append(f"Python {env.python_version} is outside {framework.label}'s {framework.requires_python}")
        if numpy_ok is False:
            broken.append(f"numpy {numpy} is outside {framework.label}'s {framework.numpy}")
    evidence.append(f"this env: Python {env.python_version or '?'}, numpy {numpy or 'not installed'}")
    if broken:
        return [
            fail(
                "mixed.python-numpy",
                "The interpreter or numpy is outside what one of the frameworks requires",
                "Plan the frameworks together (`tfgpu-install plan --with ...`) for versions whose Python and "
                "numpy ranges meet, or keep them in separate envs.",
                *broken,
                *evidence,
            )
        ]
    return [ok("mixed.python-numpy", "Python and numpy satisfy every framework in the env", *evidence)]
