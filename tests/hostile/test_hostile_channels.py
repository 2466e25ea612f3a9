"""Attacks on conda channels in plans and exports (tfgpu.engines.channels): a channel URL whose
query or fragment would swallow the ``/<subdir>/repodata.json`` the engines append (and carry a
``?token=`` into every export), dot segments one engine normalises and another does not, and an
anaconda.org-style ``/t/<token>/`` written into a file others read. Each through the real CLI."""

from __future__ import annotations

import pytest

from tfgpu import cli
from tfgpu.engines.channels import channel_urls, planned
from tfgpu.errors import UsageError

TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64", "--tf", "2.21", "--mode", "conda")
FORMATS = ("bash", "dockerfile", "ansible", "cloud-init", "slurm", "kubernetes")


def script(capsys, tmp_path, fmt: str, channel: str) -> tuple[int, str]:
    out = tmp_path / fmt
    code = cli.main(["script", *TARGET, "--format", fmt, "-o", str(out), f"--channel={channel}"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "channel",
    [
        "https://mirror.example.org/cf?token=s3cret",
        "https://mirror.example.org/cf#frag",
        "https://mirror.example.org/cf?",
        "https://mirror.example.org/cf/../other",
        "https://mirror.example.org/./cf",
        "https://mirror.example.org/cf/%2E%2e/other",
    ],
)
def test_a_channel_url_is_a_directory_and_nothing_else(capsys, tmp_path, fmt, channel):
    code, err = script(capsys, tmp_path, fmt, channel)
    assert code == 2 and "bad-channel" in err
    assert not (tmp_path / fmt).exists()


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_access_token_is_never_written_into_an_export(capsys, tmp_path, fmt):
    code, err = script(capsys, tmp_path, fmt, "https://conda.anaconda.org/t/tk-5ecret/conda-forge")
    assert code == 2 and "bad-channel" in err
    assert "tk-5ecret" not in err  # the refusal itself does not repeat the secret
    assert not (tmp_path / fmt).exists()


def test_create_reads_the_same_channels_the_export_would_refuse():
    # The same door for create: a query-bearing channel would be fetched as a broken URL there too.
    for channel in ("https://mirror.example.org/cf?x=1", "https://mirror.example.org/a/../b"):
        with pytest.raises(UsageError) as raised:
            channel_urls((channel,))
        assert raised.value.code == "bad-channel"
    # A token is the user's own on this machine: create and a plan read it, only an export refuses it.
    token = "https://conda.anaconda.org/t/tk-1/conda-forge"
    assert planned((token,)) == (token,)
    assert channel_urls((token,)) == [token]


def test_a_plain_channel_url_still_exports(capsys, tmp_path):
    # 't' as the last segment is a channel named t, not a token (conda reads a segment after it as one)
    code, err = script(capsys, tmp_path, "bash", "https://mirror.example.org/cf/t")
    assert code == 0, err


@pytest.mark.parametrize("channel", ["https://mirror.example.org/{{CH}}", "https://mirror.example.org/cf/{{HOME}}"])
def test_apptainer_never_reads_a_channel_as_a_build_argument(capsys, tmp_path, channel):
    # Apptainer substitutes {{ NAME }} anywhere in a definition file, quoted or commented, from
    # --build-arg: the micromamba line would install from a channel the file does not show.
    code, err = script(capsys, tmp_path, "slurm", channel)
    assert code == 2 and "bad-data" in err
    assert not (tmp_path / "slurm").exists()


def test_a_single_brace_in_a_channel_still_exports(capsys, tmp_path):
    code, err = script(capsys, tmp_path, "slurm", "https://mirror.example.org/{a}/cf")
    assert code == 0, err
    assert "{a}" in (tmp_path / "slurm" / "tfgpu-env.def").read_text()


def test_plan_names_the_channels_it_reads_not_conda_forge(capsys):
    mirror = "https://mirror.example.org/cf"
    code = cli.main(["plan", *TARGET, "--channel", mirror])
    out = capsys.readouterr().out
    assert code == 0
    assert mirror in out
    assert not any(line.startswith("conda-forge ") for line in out.splitlines())
    code = cli.main(["plan", *TARGET])
    out = capsys.readouterr().out
    assert code == 0 and any(line.startswith("conda-forge ") for line in out.splitlines())


@pytest.mark.parametrize("export", [False, True])
def test_a_channel_that_begins_with_two_slashes_is_a_url_without_its_scheme_not_a_path(export):
    """``//user:password@host/chan`` is a URL whose scheme was left out, not the local path POSIX
    would read (shown as ``file:////user%3Apassword%40host/chan``, the password in it)."""
    with pytest.raises(UsageError) as refused:
        planned(("//user:s3cret@host/chan",), export=export)
    assert refused.value.code == "bad-url"
    assert "s3cret" not in refused.value.message + "".join(refused.value.alternatives)
    assert "//***@host/chan" in refused.value.message
