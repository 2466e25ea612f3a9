"""What each table in ``tfgpu/data`` must look like, checked whenever a table is parsed.

The kinds of value and the forms they are held to are ``tfgpu.data.checks``'; this module says which
table holds what. A violation is ``bad-data`` (exit 2) naming the file, the key and what was expected.
"""

from __future__ import annotations

from tfgpu.data import dlopened
from tfgpu.data.checks import _OPT, _WAY, DRIVER, SOURCES, Bool, Int, Invalid, List, Map, Rows, Str, Table, opt
from tfgpu.errors import UsageError

WHEEL = Table(
    {
        "python": List(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
        "platform_tag": opt(Str("line")),
        "cuda_build": Bool(),
        "cuda": opt(Str("version")),
        "cudnn": opt(Str("version")),
        "compute_capabilities": List(Str(r"(sm|compute)_[0-9]{2,3}[a-z]?|[0-9]+\.[0-9]+")),
        "shim_for": opt(Str("line")),
        "wheel": opt(Str("line")),
        "cudnn_compiled": opt(Str("version")),
        "ptx_isa": opt(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
        "source": SOURCES,
        "unverified": List(Str("line")),
    }
)
SCHEMAS: dict[str, Table] = {
    "tensorflow.toml": Table(
        {
            "release": Rows(
                Table(
                    {
                        "version": Str("version", blank=False),
                        "uploaded": opt(Str("line")),
                        "requires_python": opt(Str("specifier")),
                        "gpu_package": opt(Str("name")),
                        "numpy": opt(Str("specifier")),
                        "prerelease": Bool(),
                        "cuda_extra": opt(Str(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")),
                        "and_cuda": Map(Str("pin"), key=Str("name", blank=False)),
                        "wheels": Map(WHEEL, key=Str(r"[a-z0-9_]+", blank=False)),
                        "source": SOURCES,
                    }
                )
            )
        }
    ),
    "companions.toml": Table(
        {
            "generated": opt(Str("line")),
            "index": opt(Str("line")),
            "release": Rows(
                Table(
                    {
                        "framework": Str(r"torch|jax", blank=False),
                        "version": Str("version", blank=False),
                        "extra": Str(r"(cuda[0-9]+)?"),
                        "stack": Str(r"(cu[0-9]+)?"),
                        "python": List(Str(r"[0-9]+\.[0-9]+")),
                        "numpy": Str("specifier"),
                        "wheels": List(Str("line")),
                        "nvidia": Map(Str("pin"), key=Str("name", blank=False)),
                        # What the build runs on, read from the wheel; optional, so an overlay
                        # written before these columns still loads (its rows are then unchecked).
                        "cuda": opt(Str(r"([0-9]{1,3}\.[0-9]{1,3})?")),
                        "driver": opt(Str(f"({DRIVER})?")),
                        "gpu_archs": opt(List(Str(r"(sm|compute)_[0-9]{2,3}[a-z]?"))),
                        "gpu_range": opt(List(Str(r"[0-9]{1,2}\.[0-9]"))),
                        "archs_from": opt(Str("line")),
                        "source": SOURCES,
                    }
                )
            ),
            "versions": Map(List(Str("version")), key=Str("name", blank=False)),
            "collision": Rows(
                Table({"distributions": List(Str("name", blank=False)), "paths": List(Str("line")), "source": SOURCES}),
                required=False,
            ),
        }
    ),
    "tensorflow_series.toml": Table(
        {
            "series": Rows(
                Table(
                    {
                        "series": Str(r"[0-9]{1,4}\.[0-9]{1,4}", blank=False),
                        "python": Str("line"),
                        "compiler": Str("line"),
                        "bazel": Str("line"),
                        "cuda": Str("line"),
                        "cudnn": Str("line"),
                        **_OPT,
                    }
                )
            )
        }
    ),
    "quirks.toml": Table(
        {
            "quirk": Rows(
                Table(
                    {
                        "code": Str(r"[a-z0-9][a-z0-9-]*", blank=False),
                        "tensorflow": Str("specifier"),
                        "modes": List(Str(r"pip|conda|system")),
                        "python": opt(Str("specifier")),
                        "effect": Str(r"[a-z-]+"),
                        "newer": opt(Str("line")),
                        "message": Str("line"),
                        "fix": Str("line"),
                        "source": SOURCES,
                    }
                )
            )
        }
    ),
    "cuda.toml": Table(
        {
            "toolkit": Rows(
                Table(
                    {
                        "version": Str("version", blank=False),
                        "linux": opt(Str(DRIVER)),
                        "windows": opt(Str(DRIVER)),
                        "runfile": opt(Str(r"[A-Za-z0-9._+-]+")),
                        "runfile_url": opt(Str(r"(https?|file)://[^\s]+")),
                        "md5": opt(Str(r"[0-9a-f]{32}")),
                        "sha256": opt(Str(r"[0-9a-f]{64}")),
                        **_OPT,
                    }
                )
            ),
            "mvc": Rows(
                Table(
                    {"cuda_major": Int(), "mvc": Bool(), "linux": opt(Str(DRIVER)), "windows": opt(Str(DRIVER)), **_OPT}
                ),
                required=False,
            ),
            "wsl2": Table({"min_driver": opt(Str(DRIVER))}, required=False),
            "wsl2_driver": Rows(Table({"cuda_major": Int(), "min_driver": Str(DRIVER), **_OPT}), required=False),
        }
    ),
    "cudnn_archives.toml": Table(
        {
            "archive": Rows(
                Table(
                    {
                        "version": Str("version", blank=False),
                        "cuda_major": Int(),
                        "cuda_min": opt(Str("line")),
                        "cuda_max": opt(Str("line")),
                        "platform": opt(Str(r"[a-z0-9_]+")),
                        "filename": Str(r"[A-Za-z0-9._+-]+"),
                        "url": Str(r"(https?|file)://[^\s]+"),
                        "sha256": opt(Str(r"[0-9a-f]{64}")),
                        "size": opt(Int()),
                        "manifest": opt(Str("line")),
                        **_OPT,
                    }
                ),
                nonempty=False,
            )
        }
    ),
    "gpu_peaks.toml": Table(
        {
            "arch": Rows(
                Table(
                    {
                        "cc": Str(r"[0-9]{1,4}\.[0-9]{1,4}", blank=False),
                        "name": Str("line"),
                        "fp32": Int(),
                        "tf32": Int(),
                        "fp16": Int(),
                        "bf16": Int(),
                        "source": SOURCES,
                    }
                )
            )
        }
    ),
    "server_pythons.toml": Table(
        {
            "distribution": Rows(
                Table(
                    {
                        "name": Str("line", blank=False),
                        "python3": Str(r"3\.[0-9]+"),
                        "pythons": List(Str(r"3\.[0-9]+")),
                        "install": Str("line", blank=False),
                        **_OPT,
                    }
                )
            )
        }
    ),
    "docker_images.toml": Table(
        {
            "image": Rows(
                Table(
                    {
                        "cuda": Str("version", blank=False),
                        "cudnn_major": Int(),
                        "os": Str("line"),
                        "python": Str(r"3\.[0-9]+"),
                        "tag": Str(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", blank=False),
                        **_OPT,
                    }
                ),
                nonempty=False,
            )
        }
    ),
    "log_signatures.toml": Table(
        {
            "signature": Rows(
                Table(
                    {
                        "id": Str(r"[a-z0-9][a-z0-9.-]*", blank=False),
                        "title": Str("line"),
                        "pattern": Str("regex", blank=False),
                        "severity": Str(r"fail|warn|info"),
                        "cause": Str("line"),
                        "fix": Str("line"),
                        "source": SOURCES,
                        "example": opt(Str()),
                        "shadows": List(Str("line")),
                    }
                ),
                nonempty=False,
            )
        }
    ),
    "metal.toml": Table(
        {
            "metal": Rows(
                Table(
                    {
                        "tensorflow": Str("specifier"),
                        "metal": Str("version", blank=False),
                        "macos": opt(Str("line")),
                        "python": List(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
                        "x86_64": Bool(),
                        "package": opt(Str("name")),
                        **_OPT,
                    }
                )
            )
        }
    ),
    "conda_forge.toml": Table(
        {
            "cudatoolkit": Table({"versions": List(Str("version"), required=True)}),
            "cuda_version": Table({"versions": List(Str("version"), required=True)}),
            "cuda12_packages": Table({"names": List(Str("conda-name", blank=False), required=True)}),
            "tensorflow": Rows(Table({"versions": List(Str("version")), "cuda": List(Str("version"))}), required=False),
        }
    ),
    "conda_cudnn.toml": Table(
        {
            "cudnn": Rows(
                Table(
                    {
                        "version": Str("version", blank=False),
                        "cuda": List(Str("version")),
                        "cuda_win": List(Str("version")),
                        "runs_with": List(Str("line")),
                        "skip": List(Str("line")),
                        "source": SOURCES,
                    }
                )
            )
        }
    ),
    "ptx.toml": Table(
        {
            "target": Rows(
                Table(
                    {
                        "cc": Str(r"[0-9]{1,4}\.[0-9]{1,4}"),
                        "min_ptx_isa": Str(r"[0-9]{1,4}\.[0-9]{1,4}"),
                        "name": opt(Str("line")),
                        "family": Str("line"),
                        "source": SOURCES,
                    }
                )
            ),
            "xla": Table(
                {
                    "cuda_to_ptx_isa": Map(Str(r"[0-9]{1,4}\.[0-9]{1,4}"), key=Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
                    "rule": opt(Str("line")),
                    "error": opt(Str("line")),
                },
                required=False,
            ),
            # Read by tfgpu.resolver.newgpu / archtruth: an overlay's row of the wrong shape would
            # otherwise end `plan --gpu-cc` in a traceback.
            "jit_report": Rows(
                Table(
                    {
                        "tensorflow": Str("specifier"),
                        "cc": Str("specifier"),
                        "reported": List(Str("line")),
                        "error": Str("line"),
                        "source": SOURCES,
                        "note": opt(Str("line")),
                    }
                ),
                required=False,
            ),
            "keras_xla": Table(
                {
                    "tensorflow": Str("specifier"),
                    "default": Str("line"),
                    "source": SOURCES,
                    "before_source": SOURCES,
                },
                required=False,
            ),
            "way_forward": Rows(
                Table(
                    {
                        "kind": Str("line"),
                        "text": Str("line", blank=False),
                        "source": SOURCES,
                        "artefacts": List(Str(r"(registry|pypi):[^\s]+")),
                    }
                ),
                required=False,
            ),
        }
    ),
    "artefacts.toml": Table(
        {
            "generated": opt(Str("line")),
            "artefact": Rows(
                Table(
                    {
                        "name": Str(r"(registry|pypi):[^\s]+"),
                        "kind": Str(r"registry|pypi|unknown"),
                        "url": Str("line"),
                        "result": Str(r"exists|missing|unchecked"),
                        "detail": Str("line"),
                        "checked": Str("line"),
                    }
                )
            ),
        }
    ),
    "arch_support.toml": Table(
        {
            "fatbin": Rows(
                Table(
                    {
                        "tensorflow": Str("version", blank=False),
                        "wheel": Str("line", blank=False),
                        "member": Str("line", blank=False),
                        "compute_capabilities": List(Str(r"(sm|compute)_[0-9]+")),
                        "ptx_isa": Str(r"[0-9]{1,4}\.[0-9]{1,4}"),
                        "ptx_versions": List(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
                        "source": SOURCES,
                    }
                ),
                required=False,
            ),
            "arch": Rows(
                Table(
                    {
                        "tensorflow": Str("version", blank=False),
                        "cc": Str(r"[0-9]{1,4}\.[0-9]{1,4}"),
                        "kernels": Str("native|ptx-jit|jit-fails|none|unknown"),
                        "xla": Str("ok|fails|unknown"),
                        "verdict": Str("runs|ptx-jit|no-xla|cannot-run|unknown"),
                        "why": Str("line", blank=False),
                        "source": SOURCES,
                    }
                ),
                required=False,
            ),
        }
    ),
    "macos_wheels.toml": Table(
        {
            "wheels": Rows(
                Table(
                    {
                        "project": Str("name", blank=False),
                        "version": Str("version", blank=False),
                        "prerelease": Bool(),
                        "yanked": Bool(),
                        "macos_x86_64": List(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
                        "macos_arm64": List(Str(r"[0-9]{1,4}\.[0-9]{1,4}")),
                        "source": SOURCES,
                    }
                )
            )
        }
    ),
    "pip_cuda.toml": Table(
        {
            "set": Rows(
                Table(
                    {
                        "tensorflow": Str("specifier"),
                        "cuda": Str("version"),
                        "cudnn": Str("version"),
                        "packages": List(Str("requirement", blank=False), required=True),
                        "source": SOURCES,
                    }
                ),
                nonempty=False,
            ),
            "ptxas": Table({"first_good": opt(Str("version")), "package": opt(Str("name"))}, required=False),
        }
    ),
    "sonames.toml": Table(
        {
            "cuda": Rows(
                Table(
                    {
                        "versions": Str("specifier"),
                        "source": SOURCES,
                        "libraries": Rows(
                            Table(
                                {
                                    "name": Str(r"[A-Za-z0-9_]+"),
                                    "soname": Str(r"lib[A-Za-z0-9_.{}-]+\.so[0-9.{}a-z_]*"),
                                    "version_symbol": opt(Str(r"[A-Za-z_][A-Za-z0-9_]*")),
                                }
                            )
                        ),
                    }
                )
            ),
            "dlopened": Rows(
                Table(
                    {
                        # Never blank: "" is "unknown" elsewhere, but dlopen("") hands back the program
                        # itself, and an empty RUNPATH entry is the process's working directory.
                        "name": Str(r"lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)*", blank=False),
                        "provides": Str(r"lib[A-Za-z0-9_+-]+", blank=False),
                        "caller": Str(r"lib[A-Za-z0-9_+-]+\.so[0-9.]*", blank=False),
                        "runpath": List(Str(r"[$A-Za-z0-9_./{}-]+", blank=False), required=True),
                        "wheel": Str("line", blank=False),
                        "found": Str("line", blank=False),
                        "source": SOURCES,
                    }
                ),
                required=False,
            ),
        }
    ),
    "windows.toml": Table({"release": Rows(Table({"series": Str(r"[0-9]{1,4}\.[0-9]{1,4}")}), required=False)}),
    "sources.toml": Table({"sources": Map(Table({"title": opt(Str()), "url": opt(Str("line"))}))}),
}


def validate(name: str, document: dict, where: str) -> None:
    """Check one parsed table against its schema; ``where`` names the file in messages."""
    schema = SCHEMAS.get(name)
    if schema is None:
        return
    try:
        schema.check(document, "")
    except Invalid as problem:
        if problem.expected == "present":
            message = f"{where}: {problem.where} is missing."
        else:
            message = f"{where}: {problem.where} must be {problem.expected}, not {repr(problem.value)[:80]}."
        raise UsageError("bad-data", message, [_WAY]) from None
    if name == "sonames.toml":
        dlopened.rows(document, where)  # two rows that disagree are refused here, at parse time
