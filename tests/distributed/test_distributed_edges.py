"""``tensorplay.distributed`` at its edges: the launcher naming the rank that
failed first, not a peer that failed for hearing of it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import tensorplay as tp

PROLOGUE = """
import os, sys, time
import tensorplay as tp
import tensorplay.distributed as dist
"""


def _launch(tmp_path, body: str, n: int = 2) -> subprocess.CompletedProcess:
    """The launcher running ``body`` on ``n`` ranks."""
    script = tmp_path / "ranks.py"
    script.write_text(PROLOGUE + textwrap.dedent(body))
    cmd = [sys.executable, "-m", "tensorplay.distributed.run", "--nproc-per-node", str(n), str(script)]
    env = dict(os.environ, TENSORPLAY_BACKEND=tp.cuda.backend(), PYTHONUNBUFFERED="1", TENSORPLAY_DIST_TIMEOUT="100")
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("who", "stop", "code", "last"),
    [
        (1, 'raise ValueError("this rank gives up")', 1, "ValueError: this rank gives up"),
        (0, 'raise ValueError("this rank gives up")', 1, "ValueError: this rank gives up"),
        (1, "sys.exit(3)", 3, None),
        (1, "os._exit(4)", 4, None),
    ],
)
def test_the_launcher_names_the_rank_that_stopped_not_the_peer_that_heard_it(tmp_path, who, stop, code, last):
    # the peer waits in a collective, hears of the stop at once, and fails too: often before the
    # stopping rank's process has ended (its traceback, its exit from the group)
    done = _launch(tmp_path, f"""
        dist.init_process_group()
        if dist.get_rank() == {who}:
            time.sleep(0.5)
            {stop}
        dist.all_reduce(tp.ones(2))
    """)  # fmt: skip
    assert done.returncode == code, done.stderr
    assert f"== rank {who} of 2 failed with exit code {code}; the end of its error output:" in done.stderr, done.stderr
    if last is not None:
        assert done.stderr.rstrip().endswith(last), done.stderr
    assert f"(seen by rank {1 - who} in all_reduce" in done.stderr  # the peer did fail, later
    assert "RuntimeWarning" not in done.stderr  # the package does not import the launcher's module
