"""Every Python block of the README runs as it stands, pasted alone into a fresh
interpreter's namespace, and prints what it says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_python_blocks():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("number", range(len(BLOCKS)))
def test_a_readme_block_runs_alone(number):
    block = BLOCKS[number]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, f"README.md block {number}", "exec"), {"__name__": "__readme__"})
    for expected in re.findall(r"print\(.*\)\s*# (\[.*\])$", block, flags=re.M):  # "print(...)  # [6.0, ...]"
        assert expected in printed.getvalue()
