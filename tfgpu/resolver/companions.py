"""Co-planning TensorFlow with PyTorch and JAX (``--with SPEC``): pure, from ``companions.toml``.

Owns the decision for a resolved TensorFlow release and the companions the user asked for: which
versions give ONE CUDA stack (every ``nvidia-*`` library both sides name has a published version
that satisfies both pins, the Python versions have wheels on both sides, numpy has a release both
accept), and, where none does, why not and the ways forward, ranked. Preference: a single stack
with the newest companion versions the specs admit; else two stacks (TensorFlow's CUDA 12 next
to torch's or JAX's CUDA 13: both install, but the libraries the table's ``[[collision]]`` rows
list are written by both, so the plan says ``two_stacks`` and names them); else a conflict,
raised as ``companion-conflict``.

The facts are the wheels' own METADATA (scripts/regen_companion_data.py); the check mirrors what
``uv pip compile`` decides for these pins, without running it.
"""

from __future__ import annotations

import itertools
import re

from tfgpu.data import derived, load
from tfgpu.data.updates import companion_updates
from tfgpu.errors import ImpossibleError
from tfgpu.records import record
from tfgpu.resolver import companion_fit
from tfgpu.resolver.drivers import driver_key
from tfgpu.resolver.model import Companion, CoPlan
from tfgpu.versions import Range, parse

LINUX = "linux_x86_64"


@record
class Row:
    """One release of a companion (per CUDA extra for JAX), as ``companions.toml`` lists it."""

    framework: str
    version: str
    extra: str
    stack: str
    python: tuple[str, ...]
    numpy: str
    pins: dict[str, str]
    cuda: str = ""
    """The CUDA the build was made with (torch's ``version.py``; JAX: its plugin's runtime floor)."""
    driver: str = ""
    """The Linux driver that CUDA needs ('' = unknown: an overlay written before the column)."""
    gpu_archs: tuple[str, ...] = ()
    gpu_range: tuple[str, ...] = ()
    archs_from: str = ""
    sources: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.framework}{f'[{self.extra}]' if self.extra else ''}=={self.version}"

    @property
    def label(self) -> str:
        return f"{self.framework}{f'[{self.extra}]' if self.extra else ''} {self.version}"


def _tables() -> list[dict]:
    """The shipped table, then the rows ``update-data`` fetched since (``tfgpu.data.updates``)."""
    return [load("companions.toml"), companion_updates()]


@derived
def rows() -> tuple[Row, ...]:
    """Every companion release, newest first per framework (a shipped row wins over a fetched one)."""
    seen, found = set(), []
    for table in _tables():
        for r in table.get("release", []):
            if (key := (r["framework"], r["version"], r["extra"])) not in seen:
                seen.add(key)
                found.append(
                    Row(
                        r["framework"],
                        r["version"],
                        r["extra"],
                        r["stack"],
                        tuple(r["python"]),
                        r["numpy"],
                        dict(r["nvidia"]),
                        r.get("cuda", ""),
                        r.get("driver", ""),
                        tuple(r.get("gpu_archs", ())),
                        tuple(r.get("gpu_range", ())),
                        r.get("archs_from", ""),
                        tuple(r.get("source", ())),
                    )
                )
    return tuple(sorted(found, key=lambda r: (r.framework, parse(r.version), r.extra), reverse=True))


@derived
def versions() -> dict[str, tuple]:
    """The published versions of each distribution a pin names (nvidia-*, numpy)."""
    merged: dict[str, set[str]] = {}
    for table in _tables():
        for name, listed in table.get("versions", {}).items():
            merged.setdefault(name, set()).update(listed)
    return {name: tuple(map(parse, listed)) for name, listed in merged.items()}


@derived
def collisions() -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """``((cu12 distribution, cu13 distribution), library paths both install)`` per library."""
    return tuple((tuple(c["distributions"]), tuple(c["paths"])) for c in load("companions.toml").get("collision", []))


def stack_of(pins: dict[str, str], fallback: str = "") -> str:
    """``cu12``/``cu13`` from the pinned names (``-cu12``) or the CUDA runtime's pinned major."""
    for name in pins:
        if found := re.search(r"-cu(\d+)$", name):
            return f"cu{found.group(1)}"
    for name in ("nvidia-cuda-runtime", "nvidia-cublas", "cuda-toolkit"):
        if found := re.search(r"(\d+)\.", pins.get(name, "")):
            return f"cu{found.group(1)}"
    return fallback


def matching(framework: str, extra: str | None, spec: str) -> list[Row]:
    """The rows a parsed ``--with`` spec admits, newest first (JAX without an extra: each CUDA extra)."""
    wanted = Range(spec) if spec else None
    return [
        r
        for r in rows()
        if r.framework == framework
        and (extra is None or r.extra == extra)
        and (wanted is None or wanted.contains(parse(r.version)))
    ]


def _meet(name: str, specs: list[tuple[str, str]]) -> str:
    """'' when some published version of ``name`` satisfies every ``(who, spec)``; else why not."""
    if _satisfiable(name, tuple(sorted({spec for _, spec in specs}))):
        return ""
    asked = ", ".join(f"{who} needs {spec or 'any'}" for who, spec in specs)
    return f"{name}: {asked}; no published version satisfies all of them"


@derived
def _satisfiable(name: str, specs: tuple[str, ...]) -> bool:
    """Whether a published version of ``name`` meets every specifier (the same few pin sets come
    up again for every combination the ways forward try: each is decided once)."""
    ranges = [Range(spec) for spec in specs]
    return any(all(r.contains(v) for r in ranges) for v in versions().get(name, ()))


@record
class Verdict:
    """What :func:`check` decides for one combination: the conflicts (why it cannot install, empty
    when it can), the Python versions with wheels on every side, each side's CUDA stack (TensorFlow's
    first), and whether they all share one stack."""

    conflicts: list[str]
    pythons: list[str]
    stacks: list[str]
    single: bool

    @property
    def fits_one_stack(self) -> bool:
        return not self.conflicts and self.single


def check(tf, tf_pythons: tuple[str, ...], python: str | None, combo: tuple[Row, ...]) -> Verdict:
    """The verdict for TensorFlow ``tf`` (a ``tables.Release``) with the rows of ``combo``."""
    tf_label = f"TF {tf.version}"
    conflicts = []
    pythons = [p for p in tf_pythons if all(p in row.python for row in combo)]
    if python is not None and python not in pythons:
        has = "; ".join(f"{row.label} has wheels for {_span(row.python)}" for row in combo)
        conflicts.append(f"Python {python}: {tf_label} has wheels for {_span(tf_pythons)}; {has}")
    elif not pythons:
        has = "; ".join(f"{row.label}: {_span(row.python)}" for row in combo)
        conflicts.append(f"Python: no version has wheels on both sides ({tf_label}: {_span(tf_pythons)}; {has})")
    numpy = [(tf_label, tf.numpy)] if tf.numpy else []
    numpy += [(row.label, row.numpy) for row in combo if row.numpy]
    if len(numpy) > 1 and (why := _meet("numpy", numpy)):
        conflicts.append(why)
    pins: dict[str, list[tuple[str, str]]] = {}
    for who, table in [(tf_label, tf.and_cuda), *((row.label, row.pins) for row in combo)]:
        for name, spec in table.items():
            pins.setdefault(name, []).append((who, spec))
    conflicts += [why for name, specs in sorted(pins.items()) if len(specs) > 1 and (why := _meet(name, specs))]
    stacks = [tf_stack(tf)]
    stacks += [row.stack for row in combo]
    return Verdict(conflicts, pythons, stacks, len(set(stacks)) == 1)


def tf_stack(tf) -> str:
    """TensorFlow's CUDA stack: from its ``and-cuda`` pins, else its wheel's CUDA major."""
    return stack_of(tf.and_cuda, "cu" + (tf.wheels[LINUX].cuda.split(".")[0] if LINUX in tf.wheels else ""))


def _span(pythons) -> str:
    return f"{pythons[0]}–{pythons[-1]}" if len(pythons) > 1 else (pythons[0] if pythons else "none")


#: The most combinations of companion versions one decision weighs (the shipped table has 16 torch
#: and 49 JAX rows: 784). A data overlay of thousands of rows must not turn one plan into millions
#: of checks; the newest combinations come first, so the bound keeps the ones a user would pick.
MAX_COMBOS = 4096


def combos(candidates: list[list[Row]]):
    """The combinations of the candidates, the newest first (the first spec's version weighs most),
    at most :data:`MAX_COMBOS`."""
    return itertools.islice(itertools.product(*candidates), MAX_COMBOS)


def colliding(tf, combo: tuple[Row, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The distributions of the two stacks that install the same files, and those files."""
    named = set(tf.and_cuda) | {name for row in combo for name in row.pins}
    dists, paths = [], []
    for pair, shared in collisions():
        if all(name in named for name in pair) and shared:
            dists += pair
            paths += shared
    return tuple(dists), tuple(paths)


def coplan(
    tf,
    tf_pythons,
    python,
    python_given: bool,
    asked: list[tuple[str, str | None, str, str]],
    others,
    driver: str | None = None,
    ccs: tuple[str, ...] = (),
    os: str = "linux",
):
    """The :class:`CoPlan` for release ``tf``; ``asked``: ``(framework, extra, spec, as typed)``;
    ``others``: TensorFlow releases to name when this one shares no stack with the companions;
    ``driver``/``ccs``: the target's driver and GPUs, which every companion's build must run on.
    Raises ``companion-unknown-version``, ``companion-cannot-run`` or ``companion-conflict``."""
    candidates = []
    skipped: list[str] = []
    own = tf_stack(tf)
    for framework, extra, spec, typed in asked:
        # Newest first; of one version's CUDA extras (``jax`` without one), TensorFlow's stack first.
        found = sorted(
            (companion_fit.for_os(r, os) for r in matching(framework, extra, spec)),
            key=lambda r: (parse(r.version), r.stack == own),
            reverse=True,
        )
        if not found:
            known = ", ".join(r.version for r in matching(framework, extra, "")[:8])
            raise ImpossibleError(
                "companion-unknown-version",
                f"--with {typed}: no {framework} release in the data matches (newest known: {known or 'none'}).",
                [f"--with {framework}  (the newest that fits)", "tfgpu-install update-data, for newer releases"],
            )
        runnable = [r for r in found if not companion_fit.why_not(r, driver, ccs)]
        if not runnable:
            raise cannot_run(typed, framework, found, driver, ccs, os)
        # The newer versions the spec admits that this target cannot run: said, not silently passed.
        newer = [r for r in found if parse(r.version) > parse(runnable[0].version)]
        skipped += [f"Not {r.label}: {'; '.join(companion_fit.why_not(r, driver, ccs))}." for r in newer[:3]]
        if len(newer) > 3:
            skipped.append(f"Not the {len(newer) - 3} other newer {framework} releases, for the same reasons.")
        candidates.append(runnable)
    pinned_python = python if python_given else None
    verdicts = [(combo, check(tf, tf_pythons, pinned_python, combo)) for combo in combos(candidates)]
    single = next((cv for cv in verdicts if cv[1].fits_one_stack), None)
    double = next((cv for cv in verdicts if not cv[1].conflicts and not cv[1].single), None)
    chosen = single or double
    newest = verdicts[0]
    single_stack = chosen is not None and chosen[1].single

    def runs(row: Row) -> bool:
        return not companion_fit.why_not(companion_fit.for_os(row, os), driver, ccs)

    ways = [] if single_stack else ways_forward(tf, tf_pythons, pinned_python, asked, chosen or newest, others, runs)
    if chosen is None:
        combo, verdict = newest
        raise ImpossibleError(
            "companion-conflict",
            f"TF {tf.version} and {', '.join(r.label for r in combo)} cannot share one environment: "
            + "; ".join(verdict.conflicts)
            + ("" if len(verdicts) == 1 else " (and no other version the --with specs admit fits either)"),
            ways,
        )
    combo, verdict = chosen
    dists, paths = colliding(tf, combo) if not verdict.single else ((), ())
    reasons = [f"TF {tf.version} installs CUDA {_major(verdict.stacks[0])} from PyPI ({tf.cuda_extra or 'pins'})."]
    for row, stack in zip(combo, verdict.stacks[1:], strict=True):
        reasons.append(f"{row.label} installs CUDA {_major(stack)} (its wheels' nvidia-* requirements).")
    if verdict.single:
        reasons.append("One CUDA stack: every nvidia-* library both name has a published version both accept.")
    else:
        reasons.append(
            "Two CUDA stacks: the pins do not conflict, but both stacks install "
            + (", ".join(sorted({p.split("/lib/")[0] + "/lib/" for p in paths})) or "their own copies of CUDA")
            + " — whichever unpacks last wins."
        )
    if newest[0] != combo:
        why = "; ".join(newest[1].conflicts) or "it needs a second CUDA stack"
        reasons.append(f"Not {', '.join(r.label for r in newest[0])}: {why}.")
    reasons += skipped
    reasons += [runs_reason(r, driver, ccs) for r in combo]
    return CoPlan(
        asked=tuple(a[3] for a in asked),
        companions=tuple(
            Companion(
                r.requirement,
                r.framework,
                r.version,
                r.extra,
                r.stack,
                r.cuda,
                r.driver,
                r.gpu_archs or tuple(r.gpu_range),
                r.archs_from,
                r.sources,
            )
            for r in combo
        ),
        outcome="single-stack" if verdict.single else "two-stacks",
        two_stacks=not verdict.single,
        stacks=tuple(verdict.stacks),
        pythons=tuple(verdict.pythons),
        colliding=dists,
        colliding_paths=paths,
        shared_pins=tuple(
            f"{name}{spec}" for row in combo for name, spec in sorted(row.pins.items()) if name in tf.and_cuda and spec
        ),
        reasons=tuple(reasons),
        ways_forward=tuple(ways) if not verdict.single else (),
        gpu_ccs=tuple(ccs),
    )


def runs_reason(row: Row, driver: str | None, ccs: tuple[str, ...]) -> str:
    """Why ``row`` runs on the target, or what about that its wheel does not say."""
    text = f"{row.label}: a CUDA {row.cuda or '?'} build, needs driver >= {row.driver or '?'}"
    text += f" ({'this target has ' + driver if driver else 'no driver given'})"
    if ccs and (unknown := companion_fit.unchecked(row, ccs)):
        return text + f"; its wheel states no GPU architectures, so {', '.join(unknown)} is not checked."
    if ccs:
        return text + f"; carries code for {', '.join(ccs)} ({companion_fit.carried(row)}, from {row.archs_from})."
    return text + f"; carries {companion_fit.carried(row)}."


def cannot_run(typed: str, framework: str, found: list[Row], driver: str | None, ccs: tuple[str, ...], os: str):
    """``companion-cannot-run``: no version the spec admits runs on the target; the ways forward name
    the newest release of the framework that does, and the driver or GPU the asked one needs."""
    newest = found[0]
    why = companion_fit.why_not(newest, driver, ccs)
    ways = []
    others = (companion_fit.for_os(r, os) for r in matching(framework, None, ""))
    other = next((r for r in others if not companion_fit.why_not(r, driver, ccs)), None)
    if other is not None:
        ways.append(
            f"--with '{other.requirement}': the newest {framework} that runs on this target ({runs_reason(other, driver, ccs)})"
        )
    if newest.driver and driver and driver_key_lt(driver, newest.driver):
        ways.append(
            f"Upgrade the NVIDIA driver to >= {newest.driver} (R{newest.driver.split('.')[0]} or newer) for {newest.label}."
        )
    if ccs and companion_fit.gpu_verdict(newest, ccs[0]) is False:
        ways.append(f"A GPU of {companion_fit.carried(newest)} for {newest.label}.")
    more = "" if len(found) == 1 else f" (nor does any of the {len(found)} {framework} releases --with {typed} admits)"
    return ImpossibleError(
        "companion-cannot-run",
        f"--with {typed}: {'; '.join(why)}{more} [sources: {', '.join(newest.sources) or 'none recorded'}].",
        ways or ["Plan without --with."],
    )


def driver_key_lt(found: str, needed: str) -> bool:
    return driver_key(found) < driver_key(needed)


def _major(stack: str) -> str:
    return stack[2:] or "?"


def ways_forward(tf, tf_pythons, python, asked, chosen, others, runs=lambda row: True) -> list[str]:
    """Ranked: companion versions sharing TF's stack; TF releases sharing the companions' stack;
    separate envs; a two-stack env (where the pins allow one)."""
    combo, verdict = chosen
    ways = []
    # only versions that run on the target's driver and GPU are offered
    relaxed = [[r for r in matching(framework, None, "") if runs(r)] for framework, _, _, _ in asked]
    shared = [c for c in combos(relaxed) if check(tf, tf_pythons, python, c).fits_one_stack]
    if shared:
        listed = ", ".join(" + ".join(r.label for r in c) for c in shared[:4])
        first = " ".join(f"--with '{r.requirement}'" for r in shared[0])
        ways.append(f"Versions that share TF {tf.version}'s CUDA stack: {listed} ({first}).")
    for other in others:
        if other.version == tf.version or not other.and_cuda or LINUX not in other.wheels:
            continue
        if other.version.is_prerelease and not tf.version.is_prerelease:
            continue
        pythons = other.wheels[LINUX].python
        fits = [combo, *(c for c in combos(relaxed) if c != combo)]
        found = next((c for c in fits if check(other, pythons, python, c).fits_one_stack), None)
        if found is not None:
            flags = " ".join(f"--with '{r.requirement}'" for r in found)
            ways.append(
                f"TF {other.version} shares one CUDA stack with {', '.join(r.label for r in found)} "
                f"(--tf {other.version} {flags})."
            )
            break
    ways.append(
        f"Separate environments side by side: `tfgpu-install create --tf {tf.version}` for TensorFlow, and "
        f"another venv for {', '.join(r.requirement for r in combo)}; each keeps its own CUDA stack."
    )
    if not verdict.conflicts and not verdict.single:
        dists, _ = colliding(tf, combo)
        ways.append(
            "One env with two CUDA stacks (the plan says two_stacks: true): "
            + (f"{', '.join(dists)} install the same library files, so " if dists else "")
            + "`create` installs TensorFlow's CUDA wheels apart (lib/tfgpu/cudaNN), never one over the other."
        )
    return ways
