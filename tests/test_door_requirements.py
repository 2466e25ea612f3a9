"""The requirement door holds: what uv, pip, rattler, a lock or an export is handed as a package
comes only from ``tfgpu.requirements``.

The check is at run time, where a newcomer meets it: ``requirements.Requirement`` and
``MatchSpec`` are ``str`` subclasses that only the door's functions can make, the plan's package
lists (``Packages``) take nothing else, and ``requirements.lines`` (the text of every requirements
file the tool writes) takes nothing else. A new code path that formats ``f"{name}=={version}"``
itself fails here, and in every test that reaches it, instead of handing data to an installer.
"""

from __future__ import annotations

import pytest

from tfgpu import requirements
from tfgpu.resolver.model import Packages


@pytest.mark.parametrize("field", ["pip", "cuda_extra", "conda"])
def test_the_plan_takes_no_package_the_door_did_not_make(field):
    with pytest.raises(TypeError, match="tfgpu.requirements"):
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
            for option in (pip_option(release, platform, wheel.python[-1], None),
                           conda_option(release, wheel.cuda, wheel.cudnn, wheel.python[-1], None),
                           system_option(release, platform, wheel.cuda, wheel.cudnn)):
                packages = option.packages
                assert all(isinstance(p, requirements.Requirement) for p in (*packages.pip, *packages.cuda_extra))
                assert all(isinstance(s, requirements.MatchSpec) for s in packages.conda)
                count += len(packages.pip)
    assert count > 100
