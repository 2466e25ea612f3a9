"""Which releases a ``--tf`` spec names, newest first."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tfgpu.errors import ImpossibleError
from tfgpu.resolver import tables


def candidates(spec: str | None) -> tuple[list[tables.Release], str]:
    """The releases ``spec`` admits, newest first, and how the spec was read (for the reasons).

    ``None``/``latest`` admit every release; ``2.13`` every 2.13.x (the newest that fits wins);
    ``2.13.1`` exactly that release; anything else is a PEP 440 specifier.
    """
    everything = list(tables.releases())
    if spec in (None, "latest"):
        return everything, "the newest release that fits every constraint"
    if spec[0] in "<>=!~":
        specifier = SpecifierSet(spec)
        chosen = [r for r in everything if specifier.contains(r.version, prereleases=False)]
        how = f"the newest release in {spec} that fits every constraint"
    else:
        version = Version(spec)
        if len(version.release) <= 2 and not (version.is_postrelease or version.is_prerelease):
            prefix = version.release
            chosen = [r for r in everything if r.version.release[:len(prefix)] == prefix]
            how = f"the newest {spec}.x release that fits every constraint"
        else:
            chosen = [r for r in everything if r.version == version]
            how = f"release {spec}, as requested"
    if not chosen:
        raise unknown_version(spec, everything)
    return chosen, how


def unknown_version(spec: str, everything: list[tables.Release]) -> ImpossibleError:
    newest = everything[0].version
    alternatives = [f"The newest release is {newest}: --tf {newest} (or --tf latest)."]
    try:
        wanted = Version(spec.lstrip("<>=!~"))
        same_series = [str(r.version) for r in everything if r.version.release[:2] == wanted.release[:2]]
        if same_series:
            alternatives.insert(0, f"Releases of {wanted.major}.{wanted.minor}: {', '.join(reversed(same_series))}.")
        elif wanted.major != 2:
            alternatives.insert(0, "tfgpu-install covers TensorFlow 2.x (2.0.0 to "
                                   f"{newest}); TensorFlow 1.x GPU builds need CUDA 10.0 or older.")
    except ValueError:
        pass
    return ImpossibleError(
        "unknown-tf-version",
        f"No TensorFlow release matches --tf {spec!r}: the releases known to tfgpu-install run from "
        f"{everything[-1].version} to {newest} (final releases only).",
        alternatives,
    )
