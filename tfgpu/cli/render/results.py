"""Human-readable output with rich. Part of the CLI layer: only ``tfgpu.cli`` imports it."""

from __future__ import annotations

from itertools import groupby

from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from tfgpu.cli.render import libs as render_libs
from tfgpu.cli.render.console import table
from tfgpu.cli.render.doctor import doctor, log_matches  # noqa: F401 - results are shown through this module
from tfgpu.cli.render.live import ConsoleReporter  # noqa: F401 - the CLI's reporter, found here with the other renderers
from tfgpu.cli.render.live import err as _err
from tfgpu.cli.render.live import out as _out
from tfgpu.doors.controls import shown
from tfgpu.doors.quoting import sh
from tfgpu.errors import TfgpuError


def error(err: TfgpuError) -> None:
    """An error: its code, the message, and the ways forward, each line whole (they hold commands
    and paths that must survive copy and paste, on any terminal width)."""
    _err.print(f"[bold red]error: {escape(err.code)}[/]", whole=True)
    for line in err.message.splitlines():
        _err.print(escape(line), whole=True)
    for alternative in err.alternatives:
        _err.print(f"  [cyan]→[/] {escape(alternative)}", whole=True)


def targets_this_machine(resolution, detected) -> bool:
    """Whether the plan is for the machine that was detected (else its facts are beside the point)."""
    return detected is not None and (resolution.os, resolution.arch) == (detected.os, detected.arch)


def host(detected) -> None:
    """What detection found: every driver source (answered or not), GPUs, toolkits."""
    if detected is None:
        return
    lines = [
        escape(
            f"{detected.os} {detected.arch}, {detected.os_release or 'unknown OS release'}, "
            f"glibc {detected.glibc or '-'}, Python {detected.python}"
        )
    ]
    if detected.driver is not None:
        lines.append(
            escape(
                f"driver {detected.driver.version or '?'} (CUDA {detected.driver.cuda or '?'})"
                + ("" if detected.driver.agree else f" — sources disagree: {detected.driver.disagreement}")
            )
        )
        for reading in detected.driver.readings:
            answer = (
                f"{reading.driver_version or '-'} / CUDA {reading.cuda or '-'}"
                if reading.ok
                else f"no answer ({reading.error})"
            )
            lines.append(escape(f"  {reading.source}: {answer}"))
    for gpu in detected.gpus:
        memory = f", {gpu.memory_mib} MiB" if gpu.memory_mib else ""
        lines.append(escape(f"GPU {gpu.index}: {gpu.name}, compute capability {gpu.compute_capability or '?'}{memory}"))
    for kit in detected.toolkits:
        lines.append(escape(f"CUDA toolkit {kit.version} at {kit.path} ({kit.source})"))
    for note in detected.notes:
        lines.append(f"[dim]{escape(note)}[/]")
    _out.print(Panel("\n".join(lines), title="[bold]this machine[/]", title_align="left", expand=False))


def plan(resolution, detected=None, note: str | None = None) -> None:
    """The plan: the chosen combination, packages, warnings, reasons, rejected releases; what this
    machine is only when the plan is for it (a plan for macOS or Windows made here is not)."""
    if targets_this_machine(resolution, detected):
        host(detected)
    r = resolution
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold", no_wrap=True)
    summary.add_column(overflow="fold")
    summary.add_row("TensorFlow", escape(f"{r.package}=={r.tensorflow}"))
    summary.add_row("Python", r.python)
    if r.accelerator == "cuda":
        summary.add_row("CUDA", f"{r.cuda}  (built with {r.cuda_build})")
        summary.add_row("cuDNN", f"{r.cudnn} or a newer {r.cudnn.split('.')[0]}.x")
        summary.add_row(
            "Min. driver",
            f"{r.min_driver} ({r.os}); the toolkit shipped with {r.toolkit_driver}" if r.min_driver else "unknown",
        )
        summary.add_row("Driver", r.driver or "none detected / not given")
    else:
        summary.add_row("GPU", "Apple GPU through tensorflow-metal")
    summary.add_row(
        "Mode",
        r.mode
        if r.mode != "conda"
        else f"conda (TensorFlow from {'conda-forge' if r.tensorflow_source == 'conda-forge' else 'PyPI'})",
    )
    if r.conda_channels:
        # The channels create reads and no other: a plan that said conda-forge while --channel named
        # a mirror would describe another install than the one it makes.
        summary.add_row("Channels", escape(", ".join(r.conda_channels)))
    summary.add_row("Target", f"{r.os} {r.arch}")
    _out.print(Panel(summary, title="[bold]tfgpu-install plan[/]", title_align="left", expand=False))

    packages = table(
        "from", "requirement", title="Packages", title_justify="left", show_header=True, header_style="bold"
    )
    for origin, items in (
        ("conda-forge" if r.conda_channels == ("conda-forge",) else "conda", r.packages.conda),
        ("PyPI", r.packages.pip),
        ("download", r.packages.downloads),
    ):
        for item in items:
            packages.add_row(origin, escape(item))
    _out.print(packages)
    if r.coplan is not None:
        _coplan(r.coplan)

    for w in r.warnings:
        _out.prose(f"[yellow]warning[/] [bold]{escape(w.code)}[/]: ", w.message)
        if w.fix:
            _out.prose("  [dim]fix:[/] ", w.fix, indent=4)
    _out.print("[bold]Why[/]")
    for reason in r.reasons:
        _out.print(f"  • {escape(reason)}")
    if r.rejected:
        _out.print("[bold]Newer releases not taken[/]")
        for code, group in groupby(r.rejected, key=lambda rej: rej.code):
            same = list(group)
            span = same[0].tensorflow if len(same) == 1 else f"{same[-1].tensorflow}–{same[0].tensorflow}"
            _out.print(f"  • {span} [dim]({code})[/]: {escape(same[0].message)}")
    if note:
        _out.print(f"[cyan]{escape(note)}[/]")


def _coplan(plan) -> None:
    """``--with``: each companion's stack, the decision, what collides, the ways forward."""
    stacks = "one CUDA stack" if not plan.two_stacks else "TWO CUDA stacks in one env"
    _out.print(f"[bold]With[/] ({escape(', '.join(plan.asked))}): {stacks}, Python {', '.join(plan.pythons)}")
    _out.print(f"  TensorFlow  {plan.stacks[0]}")
    for companion, stack in zip(plan.companions, plan.stacks[1:], strict=True):
        _out.print(f"  {escape(companion.requirement)}  {stack}")
    if plan.colliding:
        _out.print(f"  both stacks install the same files: {escape(', '.join(plan.colliding))}")
        for path in plan.colliding_paths:
            if path.endswith((".so", ".2", ".3", ".9")):
                _out.print(f"    {escape(path)}")
    if plan.ways_forward:  # numbered under their own heading, not read as more colliding files
        _out.print("  ways forward, the first preferred:")
    for number, way in enumerate(plan.ways_forward, 1):
        _out.print(f"  {number}. {escape(way)}")


def matrix(rows: list[dict]) -> None:
    """Every release: Python, CUDA, cuDNN, drivers, GPU architectures, platforms."""
    found = table(
        "TF",
        "Python",
        "CUDA",
        "cuDNN",
        "driver Linux",
        "driver Win",
        "min CC",
        "GPU on",
        "pip CUDA",
        title="TensorFlow GPU matrix (Python, CUDA, cuDNN, min CC: Linux x86_64; GPU on macos: tensorflow-metal)",
        header_style="bold",
    )
    for row in rows:
        pythons = row["python"]
        found.add_row(
            row["tensorflow"],
            f"{pythons[0]}–{pythons[-1]}" if pythons else "-",
            row["cuda"] or "-",
            row["cudnn"] or "-",
            row["min_driver_linux"] or "-",
            row["min_driver_windows"] if "windows_x86_64" in row["gpu_platforms"] else "WSL2",
            row["min_compute_capability"] or "?",
            ", ".join(p.replace("_x86_64", "").replace(" (tensorflow-metal)", "") for p in row["gpu_platforms"]) or "-",
            "and-cuda" if any("[and-cuda]" in p for p in row["pip_cuda"]) else ("pinned" if row["pip_cuda"] else "-"),
        )
    _out.print(found)


def note(message: str) -> None:
    _err.print(f"[dim]{escape(message)}[/]")


def removed(path, recovered=()) -> None:
    for line in recovered:
        _err.print(f"  [cyan]→[/] {escape(line)}")
    _out.print(f"Removed {escape(shown(path))}")


def repair_plan(plan: dict, prefix) -> None:
    """What a repair will do, before it does it (stderr: it precedes a question)."""
    _err.print(f"[bold]Repair of {escape(str(prefix))}[/] ({plan['manager']} packages)")
    for title, rows in (("add", plan["add"]), ("change", plan["change"])):
        for row in rows:
            was = f" (now {row['installed']}: {row['reason']})" if row["installed"] else ""
            _err.print(f"  {title} {escape(row['wanted'])}{escape(was)}")
    for path in plan["files"]:
        _err.print(f"  write {escape(path)}")
    _left_open(plan, _err)
    if plan["nothing_to_do"] and not plan.get("left_open"):
        _err.print("  nothing to do: the env already has what its TensorFlow needs")


def _left_open(plan: dict, console) -> None:
    for line in plan.get("not_fully_read", ()):
        console.print(
            f"  [yellow]not fully read[/]: {escape(line)}; the load hook's order may miss that library "
            "(reinstall the wheel that ships it, then repair again)"
        )
    for item in plan.get("left_open", ()):
        console.print(
            f"  [yellow]left open[/]: {escape(item['path'])} links out of the env ({escape(item['links_to'])}) and the "
            "env holds no file of that library of its own to link instead; reinstall the wheel that ships it "
            "(`uv pip install --reinstall --no-deps NAME==VERSION`), then repair again"
        )


def repaired(summary: dict, failing: bool = False) -> None:
    """A repair: what it added (with versions), changed and wrote, that it is kept, how to undo it;
    ``failing``: its GPU check failed and the error printed next says why."""
    plan = summary["plan"]
    if summary.get("declined"):
        _out.print("Nothing was changed.")
        return
    if summary.get("dry_run") or plan["nothing_to_do"]:
        repair_plan(plan, summary["prefix"])
        if summary.get("dry_run") and not plan["nothing_to_do"]:
            _out.print("Dry run: nothing was changed. Run again without --dry-run to repair.")
        elif plan.get("left_open"):
            _out.print(f"{escape(summary['prefix'])}: nothing a repair writes closes what is left open (above).")
        else:
            _out.print(f"{escape(summary['prefix'])} needs no repair.")
        return
    added = ", ".join(f"{p['name']} {p['version']}" for p in summary.get("added", [])) or "none"
    changed = ", ".join(f"{p['name']} {p['from']} -> {p['to']}" for p in summary.get("changed", [])) or "none"
    files = summary.get("files", [])
    _out.print(
        f"Repaired {escape(summary['prefix'])} (TensorFlow {escape(summary['tensorflow'] or '?')}); the change is kept",
        whole=True,
    )
    _out.print(f"  packages added: {escape(added)}")
    _out.print(f"  packages changed: {escape(changed)}")
    _out.print(f"  files written: {len(files)}{' (in the env)' if files else ''}")
    for path in files:
        _out.print(f"    {escape(path)}", whole=True)
    _left_open(plan, _out)
    unchecked = summary.get("not_verified")
    if unchecked and unchecked["code"] == "no-driver-here":
        not_checked(unchecked, "Repaired and kept")
    elif summary.get("verify"):
        verify(summary["verify"], reason=not failing)
    elif unchecked:
        _out.print(
            f"  • not verified ({escape(unchecked['reason'])}): `{escape(unchecked['check_with'])}` checks the GPU"
        )
    _out.print(f"Undo with: tfgpu-install repair --prefix {escape(shown(sh(summary['prefix'])))} --undo", whole=True)


def repair_undone(done: dict) -> None:
    if done.get("journal_set_aside"):
        _out.print(f"Set the repair journal of {escape(done['prefix'])} aside: {escape(done['journal_set_aside'])}")
        return
    _out.print(f"Put {escape(done['prefix'])} back as it was before the repair")
    for title in ("removed", "restored", "left"):
        if done.get(title):
            _out.print(f"  {title}: {escape(', '.join(done[title]))}")


def dry_run(resolution, detected, result) -> None:
    """The plan, then every step with its exact command; nothing was touched."""
    plan(resolution, detected)
    for line in result.notes:  # what a real run here would stop on (system mode without its driver)
        _out.print(f"[yellow]note[/] {escape(line)}")
    _out.print(
        f"[bold]Steps[/] (dry run: nothing was changed; the env would go to {escape(str(result.location.prefix))})",
        whole=True,
    )
    for index, step in enumerate(result.steps, 1):
        title, *details = step.describe().splitlines()
        _out.print(f"[bold]{index:2}.[/] {escape(title)}", whole=True)
        for line in details:  # commands, paths and file contents: one line each, never broken
            _out.print(escape(line), whole=True)


def created(result, resolution, unchecked: dict | None = None, naming: str = "") -> None:
    """A finished create; ``unchecked``: why its GPU was not checked (``tfgpu.cli.endings``);
    ``naming``: how the tool's own verbs name the env (``--name N`` or ``--prefix P``)."""
    _out.print(
        f"[green]✓[/] TensorFlow {escape(resolution.tensorflow)} (Python {resolution.python}) "
        f"in {escape(str(result.location.prefix))}"
    )
    # Each note once: a create's notes include its installer's, which the outcome also carries.
    for line in dict.fromkeys(result.notes + (result.outcome.notes if result.outcome else [])):
        _out.print(f"  • {escape(line)}")
    if unchecked and unchecked["code"] == "no-driver-here":
        not_checked(unchecked)
    elif result.verify:
        verify(result.verify)
    elif result.verify is None:
        how = unchecked["check_with"] if unchecked else f"tfgpu-install verify --prefix {sh(result.location.prefix)}"
        why = unchecked["reason"] if unchecked else "--no-verify"
        _out.print(f"  • not verified ({escape(why)}): `{escape(how)}` checks the GPU")
    source = (
        result.outcome.activate if result.outcome else ""
    ) or f"source {sh(f'{result.location.prefix}/bin/activate')}"
    python = sh(f"{result.location.prefix}/bin/python")
    lines: tuple[tuple[str, str, str], ...]
    if naming:  # the tool's verbs first: they need no path, and work the same in bash, zsh and fish
        lines = (
            ("activate", f'eval "$(tfgpu-install activate {naming})"  or  {source}', ""),
            ("shell", f"tfgpu-install shell {naming}", "a new shell in the env; `exit` leaves it"),
            ("run", f"tfgpu-install run {naming} -- python train.py", f"or run {python} directly"),
        )
    else:
        lines = (("activate", source, f"or run {python} directly"),)
    for label, how, says in lines:
        aside = f"  [dim]({escape(shown(says))})[/]" if says else ""
        _out.print(f"  {label + ':':<10}{escape(shown(how))}{aside}", whole=True)
    _out.print(f"  [dim]log: {escape(str(result.log_path))}[/]", whole=True)


def not_checked(unchecked: dict, done: str = "Built") -> None:
    """The one notice of a build on a machine without an NVIDIA driver: built, the GPU not
    checked here and why, and the command that checks it on the GPU host."""
    _out.print(f"  [yellow]![/] {done}; the GPU was not checked: {escape(unchecked['reason'])}.", whole=True)
    _out.print(f"    On the GPU host, check it with: {escape(unchecked['check_with'])}", whole=True)


def frameworks(report: dict) -> None:
    """``verify --with``: each import order, each framework's GPU step and how many library files
    its import mapped (the files themselves are in ``--json``)."""
    for entry in report.get("orders", []):
        mark = "[green]✓[/]" if entry.get("ok") else "[red]✗[/]"
        _out.print(f"{mark} {escape(' then '.join(entry.get('order', [])))} ({escape(str(entry.get('exit')))})")
        for step in entry.get("steps", []):
            sign = "[green]✓[/]" if step.get("ok") else "[red]✗[/]"
            where = step.get("device") or step.get("error") or "?"
            _out.print(
                f"    {sign} {escape(str(step.get('framework')))} {escape(str(step.get('version', '')))}: "
                f"{escape(str(where))}, {len(step.get('loaded') or [])} CUDA library files mapped by this step"
            )
            for line in render_libs.step_lines(step):
                _out.print(line, whole=True)
        if entry.get("reason"):
            _out.print(f"    [red]{escape(str(entry['reason']))}[/]")


def multiworker(report: dict, reason: bool = True) -> None:
    """``verify --workers N``: each worker's loss after the step, the collective, the wall time."""
    ok = report.get("ok")
    where = {
        "gpu": "one GPU each",
        "shared-gpu": "sharing GPU 0 under a memory limit each",
        "cpu": "on the CPU (no GPU visible)",
    }.get(str(report.get("devices")), str(report.get("devices")))
    head = (
        "[green]multi-worker step passed[/]"
        if ok
        else "[red]multi-worker step failed[/]" + (f": {escape(str(report.get('reason')))}" if reason else "")
    )
    _out.print(
        f"{head}: {report.get('workers')} workers {escape(where)}, collective "
        f"{escape(', '.join(report.get('collective') or ['?']))}, {report.get('seconds')} s"
    )
    for entry in report.get("results", []):
        mark = "[green]✓[/]" if entry.get("ok") else "[red]✗[/]"
        loss = entry.get("loss_after")
        detail = (
            f"loss {entry.get('loss_before'):.6f} → {loss:.6f} after the step, step {entry.get('step_seconds')} s"
            if loss is not None
            else escape(str(entry.get("error") or "no report"))
        )
        _out.print(f"  {mark} worker {entry.get('worker')}: {detail}")


def verify(report: dict, reason: bool = True) -> None:
    """The GPU check: what TensorFlow is, what it loaded from where, what each GPU computed;
    ``reason``: False when the error printed next says why it failed."""
    ok = report.get("ok")
    head = "[green]GPU check passed[/]" if ok else "[red]GPU check failed[/]"
    if not ok and reason:
        head += f": {escape(str(report.get('reason')))}"
    _out.print(head)
    info = report.get("build_info", {})
    _out.print(
        f"  TensorFlow {escape(str(report.get('tensorflow', '?')))} (built with CUDA "
        f"{escape(str(info.get('cuda_version', '?')))}, cuDNN {escape(str(info.get('cudnn_version', '?')))}), "
        f"Python {escape(str(report.get('python')))}, import {report.get('import_seconds', '?')} s"
    )
    for gpu in report.get("gpus", []):
        mark = "[green]✓[/]" if gpu.get("ok") else "[red]✗[/]"
        _out.print(
            f"  {mark} {escape(str(gpu.get('device')))} {escape(str(gpu.get('name')))} "
            f"(CC {escape(str(gpu.get('compute_capability')))}): 2048² matmul matches the CPU "
            f"(max rel. error {gpu.get('max_relative_error', float('nan')):.1e}), "
            f"{gpu.get('tflops', '?')} TFLOP/s, first call {gpu.get('first_call_seconds', '?')} s"
        )
        if gpu.get("native_kernels") is False:
            _out.print(
                f"      no SASS for CC {escape(str(gpu.get('compute_capability')))} in this wheel: its kernels run "
                "from the driver's PTX JIT, and XLA was checked in a process of its own"
            )
        for part in ("elementwise", "xla", "conv", "mixed_precision"):
            if part not in gpu:
                continue  # a report from an older check_env.py
            check = gpu.get(part) or {}
            mark = "[green]✓[/]" if check.get("ok") else "[red]✗[/]"
            detail = (
                check.get("note")
                or check.get("error")
                or ", ".join(f"{k} {v}" for k, v in check.items() if k not in ("ok", "skipped"))
            )
            _out.print(f"      {mark} {part.replace('_', ' ')}: {escape(str(detail))}")
    memory = report.get("memory")
    if memory:
        _out.print(
            f"  memory: {escape(memory.get('note', ''))}"
            + (f"; peak {memory['peak_mib']} MiB" if "peak_mib" in memory else "")
        )
    limit = report.get("memory_limit")
    if limit:
        mark = "[green]✓[/]" if limit.get("ok") else "[red]✗[/]"
        _out.print(
            f"  {mark} memory limit {limit.get('limit_mib')} MiB set before the first op: enforced "
            f"{limit.get('enforced')}, a late change refused {limit.get('late_change_refused')}"
            + (f" ({escape(str(limit['error']))})" if limit.get("error") else "")
        )
    mirrored = report.get("mirrored")
    if mirrored:
        mark = "[green]✓[/]" if mirrored.get("ok") else "[red]✗[/]"
        _out.print(
            f"  {mark} MirroredStrategy: {mirrored.get('replicas', '?')} replicas, global batch "
            f"{mirrored.get('global_batch', '?')}, loss {mirrored.get('loss', mirrored.get('error'))}"
        )
    bench = report.get("bench")
    if bench:
        bench_lines(bench)
    for line in render_libs.uses_lines(report):
        _out.print(line, whole=True)
    for line in report.get("log", []):
        _out.print(f"    [yellow]log:[/] {escape(line)}")


def bench_lines(bench: dict) -> None:
    """``verify --bench``: every figure with its median, min-max and the GPU's peak, and how it was measured."""
    for row in bench["cnn"]:
        _out.print(
            f"  bench CNN batch {row['batch']}: CPU {row['cpu_seconds']} s, GPU {row['device_seconds']} s "
            f"({row['speedup']}x), GPU mixed_float16 {row.get('device_mixed_seconds', '-')} s"
        )
    mm = bench["matmul"]
    for dtype, figure in mm["dtypes"].items():
        if "median" in figure:
            peak = f", peak {figure['ceiling']:g}" if figure.get("ceiling") else ""
            _out.print(
                f"  bench matmul {mm['n']}² {dtype}: {figure['median']:g} TFLOP/s (min {figure['min']:g}, "
                f"max {figure['max']:g}, {figure['rounds']} x {figure['per_round']} calls{peak})"
            )
        else:
            _out.print(f"  bench matmul {mm['n']}² {dtype}: {escape(figure.get('error', '-'))}")
    _out.print(f"  bench matmul {mm['cpu_n']}² fp32 on the CPU: {mm['cpu_fp32']['median']:g} TFLOP/s")
    _out.print(f"  [dim]method: {escape(mm['method'])}[/]")
    _out.print(f"  [bold]{escape(bench['verdict'])}[/]")
