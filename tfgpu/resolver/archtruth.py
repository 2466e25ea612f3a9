"""Whether a release can run on a GPU architecture the tables know (Hopper 9.0, Blackwell 10.x/12.x).

Owns the per-(release, compute capability) answer and its sources: ``judge`` combines
- the wheel's kernels: SASS/PTX from build_info or the fatbins (tensorflow.toml; the PTX ISA the
  fatbins of releases whose row lacks it carry: arch_support.toml ``[[fatbin]]``, read by
  scripts/fatbin.py);
- the driver JIT of that PTX, and the JIT failures reported for the release (ptx.toml ``[[jit_report]]``);
- XLA: the PTX ISA it emits for the release's build CUDA against the ISA the target needs
  ("PTX version 8.5 does not support target sm_120", ptx.toml ``[xla]`` and ``[[target]]``);
- whether the release's Keras compiles with XLA unasked (ptx.toml ``[keras_xla]``).
scripts/regen_arch_support.py writes every answer into tfgpu/data/arch_support.toml; the resolver
asks ``judge`` (the same function), so the table and the plan cannot disagree. Pure: tables in.
"""

from __future__ import annotations

from tfgpu.records import record
from tfgpu.resolver import gpu, newgpu, tables
from tfgpu.versions import Range, parse

RUNS, PTX_JIT, NO_XLA, CANNOT_RUN, UNKNOWN = "runs", "ptx-jit", "no-xla", "cannot-run", "unknown"
"""Verdicts: native kernels and XLA; kernels by driver JIT (slow first start); kernels run but XLA
cannot compile (and Keras does not use it unasked); the sources say it fails; nothing recorded."""


@record
class Truth:
    tensorflow: str
    cc: str
    kernels: str
    """native, ptx-jit, jit-fails (reported), none, unknown."""
    xla: str
    """ok, fails, unknown."""
    verdict: str
    why: str
    source: tuple[str, ...]


def judged_ccs() -> tuple[str, ...]:
    """The compute capabilities ptx.toml has a ``[[target]]`` row for (the ones judged here)."""
    return tuple(row["cc"] for row in newgpu.ptx_table().get("target", []))


def target_name(cc: str) -> str:
    """``sm_120 (RTX 50xx, RTX PRO 6000)`` for "12.0"."""
    row = newgpu.target_row(cc) or {}
    return row.get("name") or f"sm_{cc.replace('.', '')}"


wheel_ptx = newgpu.wheel_ptx


def _keras_uses_xla(release: tables.Release) -> dict | None:
    row = newgpu.ptx_table().get("keras_xla")
    return row if row and release.version in Range(row["tensorflow"]) else None


def judge(release: tables.Release, wheel: tables.Wheel, cc: str) -> Truth | None:
    """The answer for ``release``'s ``wheel`` on a GPU of compute capability ``cc``; None where
    ptx.toml has no target row for ``cc`` (older GPUs: tfgpu.resolver.gpu alone decides)."""
    target = newgpu.target_row(cc)
    if target is None or not wheel.cuda_build:
        return None
    sm, need = f"sm_{cc.replace('.', '')}", target["min_ptx_isa"]
    caps, isa, isa_source = wheel_ptx(release, wheel)
    sources = ["WHL-BI" if "WHL-BI" in release.source else "WHL-FATBIN", *target["source"]]
    if isa_source:
        sources.append(isa_source)
    why: list[str] = []
    coverage = gpu.coverage(cc, caps)
    if coverage is gpu.Coverage.NATIVE:
        kernels = "native"
        why.append(f"kernels: SASS for {cc} in the wheel ({gpu.describe(caps)})")
    elif coverage is gpu.Coverage.PTX_JIT:
        ptx = newgpu.newest_ptx(caps)
        ptx_text = f"{ptx}, PTX ISA {isa}" if isa else f"{ptx}, PTX ISA not read"
        report = newgpu.jit_report(release, cc)
        if report:
            kernels = "jit-fails"
            sources += report["source"]
            why.append(
                f"kernels: no SASS for {sm}; the driver JIT of {ptx_text} was reported to fail with pip TF "
                f"{', '.join(report['reported'])} on {cc} GPUs ({report['error']})"
            )
        else:
            kernels = "ptx-jit"
            why.append(
                f"kernels: no SASS for {sm}; the driver JIT-compiles {ptx_text} at start-up (minutes the first "
                f"time); no report either way for TF {release.version} on {cc}"
            )
    elif coverage is gpu.Coverage.UNKNOWN:
        kernels = "unknown"
        why.append("kernels: the wheel does not record its GPU architectures")
    else:
        kernels = "none"
        why.append(f"kernels: neither SASS nor PTX usable on {sm} ({gpu.describe(caps)})")
    if wheel.cuda.count(".") >= 1:
        emitted = newgpu.xla_ptx_isa(wheel.cuda)
        sources.append("XLA-PTXVER")
        if parse(emitted) >= parse(need):
            xla = "ok"
            why.append(f"XLA: built with CUDA {wheel.cuda}, emits PTX ISA {emitted} >= {need}, which {sm} needs")
        else:
            xla = "fails"
            if cc.startswith(("10.", "12.")):
                sources.append("ISS-111958")
            why.append(
                f"XLA: built with CUDA {wheel.cuda}, emits at most PTX ISA {emitted}, whatever ptxas is "
                f"installed; {sm} needs >= {need} (\"PTX version {emitted} does not support target '{sm}'\")"
            )
    else:
        xla = "unknown"
        why.append("XLA: the wheel's build CUDA is not recorded")
    keras = _keras_uses_xla(release)
    if xla == "fails":
        if keras:
            sources += keras["source"]
            why.append(f"Keras: model.compile defaults to {keras['default']}, which compiles with XLA unasked")
        else:
            sources += newgpu.ptx_table().get("keras_xla", {}).get("before_source", [])
            why.append("Keras: tf.keras 2.x compiles with XLA only when asked (jit_compile=True)")
    if kernels in ("none", "jit-fails") or (xla == "fails" and keras):
        verdict = CANNOT_RUN
    elif kernels == "unknown":
        verdict = UNKNOWN
    elif kernels == "ptx-jit":
        verdict = PTX_JIT
    elif xla == "fails":
        verdict = NO_XLA
    else:
        verdict = RUNS if xla == "ok" else UNKNOWN
    return Truth(str(release.version), cc, kernels, xla, verdict, "; ".join(why) + ".", tuple(dict.fromkeys(sources)))


def ways_forward(release: tables.Release, cc: str) -> tuple[str, ...]:
    """Ranked: the newest release the sources do not say fails on ``cc``, then ptx.toml's
    ``[[way_forward]]`` rows (container, self-built wheel, another Keras backend)."""
    target = newgpu.target_row(cc) or {}
    sm, need = f"sm_{cc.replace('.', '')}", target.get("min_ptx_isa", "")
    out = []
    better = newest_not_failing(cc, below=release)
    if better is not None:
        out.append(
            f"TF {better.tensorflow} is the newest release the sources do not say fails on {cc}: "
            f"{better.why} (--tf {better.tensorflow})"
        )
    cuda = newgpu.cuda_for_isa(need) if need else ""
    checked = {row["name"]: row for row in tables.load_toml("artefacts.toml").get("artefact", [])}
    for row in newgpu.ptx_table().get("way_forward", []):
        named = [checked.get(name) or _never_checked(name) for name in row.get("artefacts", [])]
        if named and all(found["result"] == "missing" for found in named):
            continue  # every artefact it names is gone from its source: not a way forward
        text = _fill(row["text"], sm=sm, cc=cc, cuda=cuda or "12.8", need=need or "?")
        out.append(text + _as_checked(named) + ".")
    out.append(
        "--allow-unsupported-gpu installs it anyway, knowing the risk; then run without XLA "
        "(jit_compile=False, TF_XLA_FLAGS=--tf_xla_auto_jit=0) and check with `tfgpu-install verify`."
    )
    return tuple(out)


def _never_checked(name: str) -> dict:
    return {"name": name, "result": "unchecked", "detail": "not in artefacts.toml", "checked": "", "url": ""}


def _as_checked(named: list[dict]) -> str:
    """What the artefacts' primary sources said (``scripts/check_artefacts.py`` wrote artefacts.toml)."""
    if not named:
        return ""
    dates = sorted({found["checked"] for found in named if found["checked"]})
    when = f"checked {dates[-1]}" if dates else "never checked"
    details = {found["detail"] for found in named}
    if all(found["result"] == "unchecked" for found in named) and len(details) == 1:
        names = ", ".join(found["name"].split(":", 1)[1] for found in named)
        return f" ({names}: not confirmed, the source did not answer when {when}: {details.pop()})"
    words = {"exists": "found", "missing": "gone", "unchecked": "not confirmed"}
    parts = [f"{found['name'].split(':', 1)[1]} {words[found['result']]} ({found['detail']})" for found in named]
    return f" ({when}: {'; '.join(parts)})"


def _fill(text: str, **values: str) -> str:
    """``text`` with each ``{name}`` of ``values`` replaced, and nothing else read as a field: a data
    overlay's row is text, never a format string (``{0}``, ``{`` or ``{sm.__class__}``)."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def newest_not_failing(cc: str, below: tables.Release | None = None) -> Truth | None:
    """The newest final release (older than ``below``) whose verdict on ``cc`` is not cannot-run."""
    for release in tables.releases():
        if release.version.is_prerelease or (below is not None and release.version >= below.version):
            continue
        wheel = release.wheels.get("linux_x86_64")
        truth = judge(release, wheel, cc) if wheel else None
        if truth is not None and truth.verdict != CANNOT_RUN:
            return truth
    return None
