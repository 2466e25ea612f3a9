"""The requirement door holds: what uv, pip, rattler, a lock or an export is handed as a package
comes only from ``tfgpu.doors.requirements``.

The check is at run time, where a newcomer meets it: ``requirements.Requirement`` and
``MatchSpec`` are ``str`` subclasses that only the door's functions can make, the plan's package
lists (``Packages``) take nothing else, and ``requirements.lines`` (the text of every requirements
file the tool writes) takes nothing else. A new code path that formats ``f"{name}=={version}"``
itself fails here, and in every test that reaches it, instead of handing data to an installer.
"""

from __future__ import annotations

import pytest

from tfgpu.doors import requirements
from tfgpu.resolver.model import Packages


@pytest.mark.parametrize("field", ["pip", "cuda_extra", "conda"])
def test_the_plan_takes_no_package_the_door_did_not_make(field):
    with pytest.raises(TypeError, match="tfgpu.doors.requirements"):
        Packages(**{field: ("tensorflow==2.15.0",) if field != "conda" else ("cudnn ==9.3.0",)})


def test_a_requirement_cannot_be_made_by_hand():
    with pytest.raises(TypeError):
        requirements.Requirement("--no-index")
    with pytest.raises(TypeError):
        requirements.MatchSpec("--override-channels")


def test_a_requirements_file_is_written_only_from_the_door():
    made = requirements.requirement("tensorflow", "==2.15.0", what="a test")
    assert requirements.lines([made]) == "tensorflow==2.15.0\n"
    with pytest.raises(TypeError):
        requirements.lines([made, "--extra-index-url=http://10.9.9.9/simple"])


def test_every_release_of_the_data_goes_through_the_door_in_every_mode():
    """Every plan the shipped data gives, in every mode, is made of door-minted requirements (the
    resolver builds its package lists only through the door, or Packages would have refused)."""
    from tfgpu.resolver import tables
    from tfgpu.resolver.packages import conda_option, pip_option, system_option

    count = 0
    for release in tables.releases():
        for platform, wheel in release.wheels.items():
            for option in (
                pip_option(release, platform, wheel.python[-1], None),
                conda_option(release, wheel.cuda, wheel.cudnn, wheel.python[-1], None),
                system_option(release, platform, wheel.cuda, wheel.cudnn),
            ):
                packages = option.packages
                assert all(isinstance(p, requirements.Requirement) for p in (*packages.pip, *packages.cuda_extra))
                assert all(isinstance(s, requirements.MatchSpec) for s in packages.conda)
                count += len(packages.pip)
    assert count > 100


def _data_requirements() -> set[str]:
    """Every requirement the shipped tables make the door render: pins of and-cuda extras,
    pip_cuda's package lists, the release names with their versions."""
    from tfgpu.data import load

    found = set()
    for row in load("tensorflow.toml")["release"]:
        name = row.get("gpu_package") or "tensorflow"
        found |= {f"{name}=={row['version']}", f"{name}[{row.get('cuda_extra') or 'and-cuda'}]=={row['version']}"}
        found |= {f"{dist}{spec}" for dist, spec in row.get("and_cuda", {}).items()}
    for cuda_set in load("pip_cuda.toml")["set"]:
        found |= set(cuda_set["packages"])
    return found


EDGES = [
    "tensorflow",
    "TensorFlow[and-cuda]==2.15.0",
    "a[y,x,y]>=1,<2,!=1.5",
    "nvidia-cudnn-cu12>=9.3.0.75,<10.0",
    "x==1.0.*",
    "x~=2.1",
    "x===1.0",
    "x==1.0+local",
    "x>=1,",
    "x>=1,,<2",
    "x[]==1",
    "x==",
    "x=1",
    "x==a b",
    "x>=1 ,<2",
    "x; python_version<'3'",
    "x @ https://e.example/x.whl",
    "-x==1",
    "x-==1",
    "x[a-]==1",
    "x==1.0.dev0",
    "x<=2!1.0",
    "x>1.0.post1",
    "x!=1.*",
    "x>=1.0a1",
    "Ab.C_d-E==1",
    "x[A_b]>1",
]


def test_every_requirement_of_the_data_is_rendered_quickly_and_as_packaging_would():
    for text in sorted(_data_requirements()):
        assert requirements._simple_canonical(text) is not None, text
        test_the_quick_rendering_is_packagings(text)


@pytest.mark.parametrize("text", EDGES)
def test_the_quick_rendering_is_packagings(text):
    """Simple requirements are rendered without importing ``packaging.requirements`` (a start-up
    cost of every ``plan``); what comes out, or the refusal, is exactly what the full parse gives."""
    from packaging.requirements import InvalidRequirement, Requirement

    quick = requirements._simple_canonical(text)
    try:
        full = str(Requirement(text)) if requirements.problem(text) is None else None
    except InvalidRequirement:
        full = None
    assert quick is None or quick == full, (quick, full)
    if full is None:
        with pytest.raises(requirements.UsageError):
            requirements.canonical(text, what="t")
    else:
        assert requirements.canonical(text, what="t") == full


def test_a_name_of_thousands_of_characters_is_no_name():
    """A distribution name is bounded (PEP 508 sets no bound; PyPI's are well under 100): one of
    thousands, from a forged lock or a --package, is refused and never echoed whole."""
    from tfgpu.doors.requirements import NAME_LIMIT, name_problem

    assert name_problem("a" * NAME_LIMIT) is None
    for name in ("a" * (NAME_LIMIT + 1), "tensorflow" * 500):
        why = name_problem(name)
        assert why is not None and len(why) < 120
        assert requirements.problem(f"{name}==1.0") is not None
