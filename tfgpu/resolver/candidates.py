"""Which releases a ``--tf`` spec names, newest first (PEP 440 pre-release rules)."""

from __future__ import annotations

from tfgpu.errors import ImpossibleError
from tfgpu.resolver import tables
from tfgpu.versions import Range, parse


def candidates(spec: str | None, pre: bool = False) -> tuple[list[tables.Release], str]:
    """The releases ``spec`` admits, newest first, and how the spec was read (for the reasons).

    ``None``/``latest`` admit every final release; ``2.13`` every 2.13.x (the newest that fits
    wins); ``2.13.1`` or ``2.22.0rc0`` exactly that release; anything else is a PEP 440 specifier.
    Pre-releases take part in ``latest``, series and ranges only with ``pre`` (or when the range
    itself names one, as PEP 440 says); an exact pre-release version always resolves.
    """
    everything = list(tables.releases())
    if spec in (None, "latest"):
        chosen = [r for r in everything if pre or not r.version.is_prerelease]
        how = "the newest release that fits every constraint" + (" (pre-releases included: --pre)" if pre else "")
    elif spec[0] in "<>=!~":
        specifier = Range(spec)
        allow = pre or bool(specifier.prereleases)
        chosen = [r for r in everything if specifier.contains(r.version, prereleases=allow)]
        how = f"the newest release in {spec} that fits every constraint" + (" (pre-releases included)" if allow else "")
    else:
        version = parse(spec)
        if len(version.release) <= 2 and not (version.is_postrelease or version.is_prerelease):
            prefix = version.release
            chosen = [
                r
                for r in everything
                if r.version.release[: len(prefix)] == prefix and (pre or not r.version.is_prerelease)
            ]
            how = f"the newest {spec}.x release that fits every constraint"
        else:
            chosen = [r for r in everything if r.version == version]
            how = f"release {spec}, as requested"
    if not chosen:
        raise unknown_version(spec or "latest", everything, pre)
    return chosen, how


def unknown_version(spec: str, everything: list[tables.Release], pre: bool = False) -> ImpossibleError:
    """``unknown-tf-version``: what is known, how old the data is, and how to get newer data."""
    # Start-up cost: `plan --json --no-detect` loads this module but not tfgpu.resolver.overlay.
    from tfgpu.resolver.overlay import data_status, describe_age

    finals = [r for r in everything if not r.version.is_prerelease]
    newest = (finals or everything)[0].version
    alternatives = [f"The newest release is {newest}: --tf {newest} (or --tf latest)."]
    try:
        wanted = parse(spec.lstrip("<>=!~"))
        same_series = [str(r.version) for r in everything if r.version.release[:2] == wanted.release[:2]]
        if same_series:
            alternatives.insert(0, f"Releases of {wanted.major}.{wanted.minor}: {', '.join(reversed(same_series))}.")
            pres = [v for v in same_series if parse(v).is_prerelease]
            if pres and not pre:
                alternatives.insert(
                    1, f"{pres[0]} is a pre-release: ask for it exactly (--tf {pres[0]}), or add --pre."
                )
        elif wanted.major != 2:
            alternatives.insert(
                0,
                "tfgpu-install covers TensorFlow 2.x (2.0.0 to "
                f"{newest}); TensorFlow 1.x GPU builds need CUDA 10.0 or older.",
            )
    except ValueError:
        pass
    status = data_status()
    alternatives.append(
        f"{describe_age(status)}. A release published since then is fetched from PyPI by "
        "`tfgpu-install update-data` (the plan itself never goes online)."
    )
    return ImpossibleError(
        "unknown-tf-version",
        f"No TensorFlow release matches --tf {spec!r}: the releases known to tfgpu-install run from "
        f"{everything[-1].version} to {everything[0].version}"
        + ("" if pre else " (pre-releases only when asked for exactly, or with --pre)")
        + ".",
        alternatives,
    )
