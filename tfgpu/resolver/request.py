"""What the user asked for: parsing and validating the selectors of every command.

Every function here turns one raw command-line string into a normalized value, or raises a
:class:`~tfgpu.errors.UsageError` (exit 2) that says what was given, what form is expected,
and an example. Whether a well-formed value is *possible* is the resolver's business.
"""

from __future__ import annotations

import re

from tfgpu.doors import requirements
from tfgpu.errors import UsageError
from tfgpu.records import record
from tfgpu.settings import Selectors
from tfgpu.versions import MAX_SPECIFIER, specifier, version

MODES = ("pip", "conda", "system")
TF_SOURCES = ("pypi", "conda-forge")
"""Where TensorFlow may come from in conda mode (``--tf-source``); the resolver chooses when none is given."""
OSES = ("linux", "wsl2", "windows", "macos")
ARCHES = ("x86_64", "aarch64")
_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}

# Patterns, compiled on first use (``re`` caches them): most runs never need them. (?a): ASCII digits
# only; \d alone takes a full-width ５３５, which would then land in every exported script.
_PYTHON = r"(?a)^(?:python|py|cp)?(\d)\.?(\d{1,2})(?:\.\d+)?$"
_DRIVER = r"(?a)^\d{3,4}(?:\.\d{1,3}){0,2}$"
_CC = r"(?a)^(?:sm_|compute_)?(\d{1,2})\.?(\d)$"


@record
class Request:
    """A normalized request. ``None`` means "not given": the host's value or a default applies."""

    tf: str | None = None
    """The TensorFlow spec as typed: ``2.13``, ``2.13.1``, ``latest`` or a PEP 440 specifier."""
    mode: str = "pip"
    """``pip``, ``conda`` or ``system``."""
    python: str | None = None
    """``3.11`` (major.minor)."""
    os: str | None = None
    """Target OS: ``linux``, ``wsl2``, ``windows`` or ``macos``."""
    arch: str | None = None
    """Target architecture: ``x86_64`` or ``aarch64``."""
    driver: str | None = None
    """Target NVIDIA driver version, e.g. ``535.104.05``."""
    gpu_cc: str | None = None
    """Target GPU compute capability, e.g. ``9.0``."""
    tf_source: str | None = None
    """conda mode: where the user wants TensorFlow from, ``pypi`` or ``conda-forge`` (``None``: the
    resolver chooses; see ``tfgpu.resolver.tfsource``)."""
    allow_unsupported_gpu: bool = False
    """Plan a release even where the sources say it cannot run on the GPU (``tfgpu.resolver.archtruth``)."""
    companions: tuple[tuple[str, str | None, str, str], ...] = ()
    """``--with``: ``(framework, extra or None, version specifier, as typed)`` per companion."""
    pre: bool = False
    """Let ``latest`` and ranges choose pre-releases (PEP 440: without it they never do; an exact
    pre-release version such as ``2.22.0rc0`` always resolves)."""


def request_for(selectors: Selectors) -> Request:
    """The checked :class:`Request` for what the user described (``tfgpu.settings.Selectors``)."""
    return make_request(**selectors.as_dict())


def make_request(
    *,
    tf: str | None = None,
    mode: str | None = None,
    python: str | None = None,
    os: str | None = None,
    arch: str | None = None,
    driver: str | None = None,
    gpu_cc: str | None = None,
    pre: bool = False,
    tf_source: str | None = None,
    allow_unsupported_gpu: bool = False,
    companions: tuple[str, ...] = (),
) -> Request:
    """Validate raw selector strings and build a :class:`Request` (``UsageError`` on bad input)."""
    target_os = parse_choice("--os", os, OSES)
    request = Request(
        tf=parse_tf_spec(tf),
        mode=parse_choice("--mode", mode, MODES) or "pip",
        python=parse_python(python),
        os=target_os,
        arch=parse_arch(arch),
        driver=parse_driver(driver),
        gpu_cc=parse_compute_capability(gpu_cc),
        pre=bool(pre),
        allow_unsupported_gpu=bool(allow_unsupported_gpu),
        tf_source=parse_choice("--tf-source", tf_source, TF_SOURCES),
        companions=parse_with(companions),
    )
    if request.tf_source and request.mode != "conda":
        raise UsageError(
            "conflicting-options",
            f"--tf-source applies to --mode conda only (got --mode {request.mode}).",
            ["Add --mode conda, or drop --tf-source."],
        )
    if target_os == "macos" and (request.driver or request.gpu_cc):
        raise UsageError(
            "conflicting-options",
            "--driver and --gpu-cc describe an NVIDIA GPU, but --os macos has none: "
            "TensorFlow on a Mac uses the GPU through Apple's tensorflow-metal plugin.",
            [
                "Drop --driver/--gpu-cc to plan a tensorflow-metal environment for macOS.",
                "Or choose --os linux or --os wsl2 for an NVIDIA GPU.",
            ],
        )
    return request


def parse_choice(flag: str, value: str | None, choices: tuple[str, ...]) -> str | None:
    """A value from a fixed set, case-insensitively."""
    if value is None:
        return None
    normalized = value.strip().lower()
    if normalized not in choices:
        raise UsageError(
            "bad-option-value",
            # cut short: the value may be a script's 100,000 characters, not a word (repr escapes controls)
            f"{flag} {value[:40]!r}{'...' if len(value) > 40 else ''} is not one of: {', '.join(choices)}.",
            [f"Use one of {flag} {' | '.join(choices)}."],
        )
    return normalized


def parse_arch(value: str | None) -> str | None:
    """``x86_64`` or ``aarch64``; ``amd64``/``x64``/``arm64`` are accepted aliases."""
    if value is None:
        return None
    normalized = _ARCH_ALIASES.get(value.strip().lower(), value.strip().lower())
    return parse_choice("--arch", normalized, ARCHES)


def parse_tf_spec(value: str | None) -> str | None:
    """Check that ``--tf`` is a version, a series, ``latest`` or a PEP 440 specifier."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() == "latest":
        return "latest"
    if text.lower().startswith("tensorflow"):
        raise UsageError(
            "bad-tf-spec",
            f"--tf takes a version, not a requirement: got {value!r}.",
            ["Write the version only, e.g. --tf 2.13, --tf 2.15.1 or --tf '>=2.15,<2.18'."],
        )

    if text and text[0] in "<>=!~":
        valid = specifier(text) is not None
    else:
        valid = version(text) is not None and re.match(r"(?a)^v?\d+(\.\d+)+", text) is not None
    if not valid:
        raise UsageError(
            "bad-tf-spec",
            f"--tf {value!r} is neither a TensorFlow version nor a version range.",
            [
                "Use a series (--tf 2.13), a release (--tf 2.13.1), --tf latest, "
                "or a PEP 440 range (--tf '>=2.15,<2.18')."
            ],
        )
    return text.lstrip("v")


def parse_python(value: str | None) -> str | None:
    """``3.11``, ``3.11.4``, ``python3.11``, ``cp311`` and ``311`` all mean ``3.11``."""
    if value is None:
        return None
    match = re.match(_PYTHON, value.strip().lower())
    if not match or match.group(1) not in "23":
        raise UsageError(
            "bad-python-version",
            f"--python {value!r} is not a Python version.",
            ["Give major.minor, e.g. --python 3.11."],
        )
    return f"{match.group(1)}.{int(match.group(2))}"


def parse_driver(value: str | None) -> str | None:
    """An NVIDIA driver version as ``nvidia-smi`` prints it: ``535.104.05``, ``527.41``, ``580``."""
    if value is None:
        return None
    text = value.strip()
    if re.match(_DRIVER, text):
        return text
    hint = ["Give the driver version that `nvidia-smi` prints as 'Driver Version', e.g. --driver 535.104.05."]
    if re.match(r"(?a)^\d{1,2}\.\d+$", text):
        hint.insert(
            0,
            f"{text} looks like a CUDA version. The driver's 'CUDA Version' is the newest "
            "CUDA it supports; the resolver needs the driver version itself.",
        )
    raise UsageError("bad-driver-version", f"--driver {value!r} is not an NVIDIA driver version.", hint)


def parse_compute_capability(value: str | None) -> str | None:
    """``9.0``, ``sm_90`` and ``90`` all mean compute capability 9.0."""
    if value is None:
        return None
    match = re.match(_CC, value.strip().lower())
    if not match or not 1 <= int(match.group(1)) <= 15:
        raise UsageError(
            "bad-compute-capability",
            f"--gpu-cc {value!r} is not a GPU compute capability.",
            [
                "Give major.minor as NVIDIA lists it, e.g. --gpu-cc 8.6 (RTX 30xx) or --gpu-cc 9.0 (H100/H200); "
                "`nvidia-smi --query-gpu=compute_cap --format=csv` prints it."
            ],
        )
    return f"{int(match.group(1))}.{match.group(2)}"


#: The frameworks ``--with`` plans next to TensorFlow, and the extras each may carry.
COMPANION_EXTRAS = {"torch": (), "jax": ("cuda12", "cuda13")}


def parse_with(values) -> tuple[tuple[str, str | None, str, str], ...]:
    """``--with`` specs (PEP 508: ``torch``, ``torch==2.15.0``, ``jax[cuda12]>=0.11``) as
    ``(framework, extra or None, specifier, as typed)``; one per framework."""
    if not values:
        return ()  # `plan` without --with imports no requirement parser
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.requirements.
    from packaging.requirements import Requirement as Parsed

    found: list[tuple[str, str | None, str, str]] = []

    if not isinstance(values, (list, tuple)):
        raise UsageError(
            "companion-unsupported",
            f"--with: a list of torch/jax requirements is expected, got {type(values).__name__}.",
            ["Give each framework once: --with torch --with 'jax[cuda12]'."],
        )
    for value in values or ():
        ways = ["--with torch, --with torch==2.10.0, --with 'jax[cuda12]' or --with 'jax[cuda12]==0.12.0.1'."]
        if not isinstance(value, str) or len(value) > MAX_SPECIFIER:
            shown = repr(value)[:80] + ("..." if len(repr(value)) > 80 else "")
            raise UsageError(
                "companion-unsupported",
                f"--with {shown}: a torch or jax requirement of at most {MAX_SPECIFIER} characters is expected.",
                ways,
            )
        # Through the requirement door's checks: packaging's own message quotes the value raw, line
        # breaks included, and a project file's `with` would print lines of its choosing.
        why = requirements.problem(value, markers=True)
        if why is not None:
            raise UsageError("companion-unsupported", f"--with {value!r} is not a PEP 508 requirement: {why}.", ways)
        parsed = Parsed(value)
        name = parsed.name.lower()
        if name not in COMPANION_EXTRAS or parsed.url or parsed.marker:
            raise UsageError(
                "companion-unsupported",
                f"--with {value!r}: only torch and jax are planned next to TensorFlow, by name and version "
                "(no URL, no marker).",
                [*ways, "Install other packages into the env afterwards (`tfgpu-install run -- uv pip install ...`)."],
            )
        extras = sorted(e.lower() for e in parsed.extras)
        if len(extras) > 1 or any(e not in COMPANION_EXTRAS[name] for e in extras):
            allowed = ", ".join(COMPANION_EXTRAS[name]) or "none"
            raise UsageError(
                "companion-unsupported",
                f"--with {value!r}: {name} takes the extras {allowed} here, got {', '.join(extras)}.",
                ways,
            )
        if str(parsed.specifier) and specifier(str(parsed.specifier)) is None:
            raise UsageError(
                "companion-unsupported",
                f"--with {value!r}: {str(parsed.specifier)[:80]!r} is not a bounded PEP 440 version specifier.",
                ways,
            )
        if any(f[0] == name for f in found):
            raise UsageError("companion-unsupported", f"--with names {name} twice.", ["Give each framework once."])
        found.append((name, extras[0] if extras else None, str(parsed.specifier), value))
    return tuple(found)
