"""Exports are read in change requests: no generated line is longer than :data:`LIMIT`, and the
tool's own programs travel as heredocs whose delimiter cannot occur in what they carry."""

from __future__ import annotations

import subprocess

import pytest
from exporthelpers import VERSIONS, render

from tfgpu import export
from tfgpu.export import embed

LIMIT = 200


def longest(made: export.Export) -> tuple[int, str]:
    return max(
        (len(line), f"{item.name}:{number}")
        for item in made.files
        for number, line in enumerate(item.content.splitlines(), 1)
    )


@pytest.mark.parametrize("tf", VERSIONS)
@pytest.mark.parametrize("mode", ["pip", "conda"])
@pytest.mark.parametrize("fmt", export.FORMATS)
def test_no_generated_line_is_longer_than_the_limit(fmt, mode, tf):
    length, where = longest(render(tf, mode, fmt))
    assert length <= LIMIT, f"{fmt} ({mode}, TF {tf}): {where} is {length} characters"


def test_a_delimiter_found_in_the_content_is_not_used():
    text = "print('x')\nTFGPU_ACTIVATION_PY\nTFGPU_ACTIVATION_PY_2 = 1\n"
    assert embed.delimiter(text, "TFGPU_ACTIVATION_PY") == "TFGPU_ACTIVATION_PY_3"
    assert embed.delimiter("nothing here", "TFGPU_X") == "TFGPU_X"
    with pytest.raises(ValueError):
        embed.delimiter("", "bad delimiter'")


def test_a_heredoc_with_its_own_delimiter_inside_still_carries_every_line(tmp_path):
    """Real bash reads the heredoc back byte for byte, even when the content holds the base name."""
    content = "a line\nEND_OF_IT\n$(touch pwned) `id` $HOME \\\\ 'quoted'\nEND_OF_IT_2\nlast"
    script = tmp_path / "write.sh"
    script.write_text(embed.file_heredoc('"$1"', content, "END_OF_IT") + "\n")
    subprocess.run(["bash", str(script), str(tmp_path / "out.txt")], check=True, cwd=tmp_path)
    assert (tmp_path / "out.txt").read_text() == content + "\n"
    assert not (tmp_path / "pwned").exists()
