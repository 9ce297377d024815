"""The benchmark harness (``benchmarks/``), not its figures: each row's target
and verdict come from the code, a failed section makes the run exit non-zero,
every side is sampled alike, the heat and fusion rows compare like with like,
and RESULTS.md's table is written from the JSON."""

from __future__ import annotations

import doctest
import json
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import common, heat, report, run, targets  # noqa: E402


def test_the_targets_module_examples_hold():
    assert doctest.testmod(targets).failed == 0


def test_a_time_target_is_judged_against_its_reference():
    row = {"tensorplay": 11.0, "driver": 10.0}
    targets.at_most(row, 1.05, of="driver", label="unrolled")
    assert row == {"tensorplay": 11.0, "driver": 10.0, "target": "<= 1.05x unrolled (1.10x here)", "met": False}
    row = {"tensorplay": 11.0}
    targets.at_most(row, 1.0)
    assert row["met"] is None and "no torch figure in this run" in row["target"]


def test_a_rate_and_an_absolute_target():
    row = {"tensorplay": 95.0, "torch": 100.0}
    targets.at_least(row, 0.95, note="; TF32 off")
    assert (row["target"], row["met"]) == (">= 95% of torch (95% here); TF32 off", True)
    row = {"tensorplay": 10.3}
    targets.below(row, 7, "us")
    assert (row["target"], row["met"]) == ("<= 7 us (10.3 here)", False)
    row = {}
    targets.measurement(row, "the reference for stage_and_launch")
    assert row == {"target": "no target: the reference for stage_and_launch", "met": None}


def test_the_simulator_judges_nothing():
    rows = [{"target": "<= 1x torch (0.5x here)", "met": True}, {"target": "no target: x", "met": None}]
    targets.unjudged(rows, "the simulator")
    assert rows[0] == {"target": "<= 1x torch (0.5x here) [not judged: the simulator]", "met": None}
    assert rows[1] == {"target": "no target: x", "met": None}


def _section(name: str, row: dict | None = None, error: Exception | None = None):
    def fn(rows: list, progress) -> None:
        progress.step(name)
        if error is not None:
            raise error
        rows.append(dict(row))

    fn.__name__ = name
    return fn


@pytest.fixture
def fake_sections(monkeypatch):
    met, missed = {"name": "fast", "tensorplay": 1.0, "torch": 2.0}, {"name": "slow", "tensorplay": 3.0, "torch": 2.0}
    targets.at_most(met, 1.0)
    targets.at_most(missed, 1.0)
    modules = {
        "good": types.SimpleNamespace(SECTIONS=[(_section("good", met), 1), (_section("late", missed), 1)]),
        "bad": types.SimpleNamespace(SECTIONS=[(_section("broken", error=AssertionError("relative error 0.5")), 1)]),
    }
    monkeypatch.setattr(run, "MODULES", modules)
    monkeypatch.setattr(run.tp.cuda, "backend", lambda: "cuda")  # judged as on a GPU
    return modules


def test_a_failed_section_makes_the_run_exit_non_zero_after_the_others(fake_sections, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert run.main(["--json", str(out), "--only", "bad", "good"]) == 1
    data = json.loads(out.read_text())
    names = [r["name"] for r in data["rows"]]
    assert names[0].endswith("broken FAILED") and names[1:] == ["fast", "slow"]  # the others still ran
    assert data["rows"][0]["target"] == "AssertionError: relative error 0.5" and data["rows"][0]["met"] is False
    assert data["summary"] == {"met": 1, "missed": ["slow"], "not_judged": 0, "failed": [names[0]]}
    text = capsys.readouterr().out
    assert "targets: 1 met, 1 missed, 0 not judged" in text and "  missed: slow" in text and "FAILED" in text
    assert "| met |" in text and "| **no** |" in text and "| yes |" in text


def test_a_run_whose_sections_pass_exits_zero_even_with_misses(fake_sections, tmp_path):
    assert run.main(["--json", str(tmp_path / "b.json"), "--only", "good"]) == 0


def test_an_unknown_section_is_refused(fake_sections, capsys):
    with pytest.raises(SystemExit):
        run.main(["--only", "nonesuch"])
    assert "invalid choice: 'nonesuch'" in capsys.readouterr().err


def test_on_the_simulator_no_row_is_judged(fake_sections, monkeypatch, tmp_path):
    monkeypatch.setattr(run.tp.cuda, "backend", lambda: "sim")
    out = tmp_path / "b.json"
    run.main(["--json", str(out), "--only", "good"])
    rows = json.loads(out.read_text())["rows"]
    assert [r["met"] for r in rows] == [None, None] and all("[not judged:" in r["target"] for r in rows)


def test_wall_us_is_the_median_of_as_many_runs_on_every_side(monkeypatch):
    monkeypatch.setattr(common, "on_gpu", lambda: True)  # (the simulator takes two runs at most)
    calls, clock = [], iter([0.0, 1.0, 10.0, 13.0, 20.0, 22.0])  # three runs of 1, 3 and 2 s
    fake_time = types.SimpleNamespace(perf_counter=lambda: next(clock))
    real = common.time
    common.time = fake_time
    try:
        us = common.wall_us(lambda: calls.append("run"), lambda: None, per=2, runs=3, before=lambda: calls.append("b"))
    finally:
        common.time = real
    assert us == statistics.median([1.0, 3.0, 2.0]) / 2 * 1e6
    assert calls == ["b", "run"] * 3  # each run after its (untimed) preparation


def test_jax_is_run_in_its_fastest_known_configuration_too():
    assert heat.JAX_CONFIGS["jax_xla_defaults"] is None
    assert heat.JAX_CONFIGS["jax_command_buffers"] == heat.COMMAND_BUFFERS
    assert heat.JAX_CONFIGS["jax_command_buffers_min_graph_size_1"].split() == [
        heat.COMMAND_BUFFERS,
        "--xla_gpu_graph_min_graph_size=1",
    ]


def test_the_heat_target_is_against_the_fastest_jax_and_torch():
    row = {"jax": 20.0, "jax_config": "jax_command_buffers_min_graph_size_1", "torch": 30.0,
           "torch_config": "torch_host_loop"}  # fmt: skip
    heat._judge_heat(row, fused=17.0, unfused=25.0)
    assert row["met"] is False  # 0.85x JAX's fastest: more than 0.8x
    assert (
        "jax_command_buffers_min_graph_size_1: 0.85x here" in row["target"]
        and "torch_host_loop: 0.57x" in row["target"]
    )
    row = {"jax": None, "torch": 30.0, "torch_config": "torch_host_loop"}
    heat._judge_heat(row, fused=10.0, unfused=25.0)
    assert row["met"] is None and "no JAX figure in this run" in row["target"]


def test_torch_without_a_while_node_says_why_its_loop_is_not_one(monkeypatch):
    """torch 2.11 to 2.13 make torch.cond an if node under capture, but have no
    while node for while_loop: the row says so instead of failing."""
    nodes = types.ModuleType("torch._higher_order_ops.cudagraph_conditional_nodes")
    nodes.if_else_node = lambda *a: None
    hops = types.ModuleType("torch._higher_order_ops")
    hops.cudagraph_conditional_nodes = nodes
    fake = types.ModuleType("torch")
    fake.__version__ = "2.11.0"
    fake._higher_order_ops = hops
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setitem(sys.modules, "torch._higher_order_ops", hops)
    monkeypatch.setitem(sys.modules, "torch._higher_order_ops.cudagraph_conditional_nodes", nodes)
    with pytest.raises(heat.Unavailable, match=r"^torch 2\.11\.0's capture makes torch\.cond an if node but has no "):
        heat._torch_while_node(fake, 8, 4)


def test_the_fusion_rows_compare_full_calls_and_graphs_with_each_torch_mode():
    from benchmarks import fusion

    assert fusion.TORCH_MODES == {
        "default": False, "reduce-overhead": True, "max-autotune-no-cudagraphs": False, "max-autotune": True,
    }  # fmt: skip


def test_the_report_quotes_the_json_and_names_the_misses(tmp_path):
    rows = [{"name": "a | b", "tensorplay": 1.0, "torch": 2.0, "target": "<= 1x torch (0.50x here)", "met": True},
            {"name": "c", "tensorplay": 3.0, "driver": 2.0, "target": "<= 1.1x driver (1.50x here)", "met": False},
            {"name": "m.s FAILED", "failed": True, "met": False, "target": "ValueError: no"}]  # fmt: skip
    data = {"meta": {"date": "2026-12-05", "device": "H200", "backend": "cuda", "commit": "abc1234"}, "rows": rows}
    text = report.section(data, "benchmarks/results/2026-12-05-abc1234.json")
    assert "## The run at `abc1234`: 2026-12-05, H200 (cuda)" in text
    assert "**1 targets met, 1 missed, 0 rows not judged, 1 failed.**" in text and "- missed: c" in text
    assert "| a \\| b | 1 | 2 | - | - | - | <= 1x torch (0.50x here) | met |" in text
    assert "| c | 3 | - | - | - | 2 | <= 1.1x driver (1.50x here) | **missed** |" in text
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nintro\n\n## 2026-12-01, older\n\nhistory\n")
    json_path = tmp_path / "2026-12-05-abc1234.json"
    json_path.write_text(json.dumps(data))
    for _ in range(2):  # written again, the section is replaced, not added
        report.main([str(json_path), "--results", str(results)])
    written = results.read_text()
    assert written.count(report.BEGIN) == 1 and written.index(report.END) < written.index("## 2026-12-01, older")
    assert written.startswith("# Benchmark results\n\nintro\n\n" + report.BEGIN)


def test_a_json_from_before_the_verdicts_gets_none():
    old = {"meta": {"date": "2026-12-04"}, "rows": [{"name": "x", "tensorplay": 1.0, "target": "<= 2 us"}]}
    text = report.section(old, "benchmarks/results/2026-12-04-90c02c8.json")
    assert "The run at `90c02c8`" in text and "| x | 1 | - | - | - | - | <= 2 us | not recorded |" in text


@pytest.mark.parametrize("section", ["temporaries", "distributed"])  # distributed: ranks by the launcher
def test_a_section_runs_on_the_simulator_and_judges_nothing(tmp_path, section):
    """``python -m benchmarks.run --only SECTION`` here: the section runs at its
    simulator sizes and exits 0; nothing is judged."""
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--only", section, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**_env(), "TENSORPLAY_BACKEND": "sim"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["meta"]["backend"] == "sim" and data["summary"]["failed"] == []
    assert data["rows"] and all(r["met"] is None for r in data["rows"])
    assert all(r["tensorplay"] > 0 for r in data["rows"])


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


# On the GPU (the lead's check: TENSORPLAY_BACKEND=cuda python -m pytest tests/test_benchmarks_harness.py -m gpu)


@pytest.mark.gpu
def test_the_raw_driver_graph_gets_the_edges_of_tensorplays_graph():
    """The "= driver" rows compare like with like: the raw capture, given
    tensorplay's edges, has as many programmatic edges as tensorplay's graph."""
    import tensorplay as tp
    from benchmarks import graph_ops, graphs

    x = tp.zeros(1 << 12)
    g = graphs._tp_graph(10, x)
    graph, plain, exec_, stream = graphs._raw_graph(10, x)
    theirs, raw = graph_ops.programmatic_edges(g._graph), graph_ops.programmatic_edges(graph)
    from cuda.bindings import driver as drv

    for done in (drv.cuGraphExecDestroy(exec_), drv.cuGraphExecDestroy(plain), drv.cuGraphDestroy(graph)):
        assert not done[0]
    drv.cuStreamDestroy(stream)
    assert raw == theirs > 0
    row = graphs._replay_device_row(10)
    assert f"programmatic edges tp/raw: {theirs}/{theirs}" in row["name"] and row["driver_plain_edges"] > 0


@pytest.mark.gpu
def test_each_torch_heat_loop_runs_or_says_why_not():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    figures, why_not, fields = heat._torch_loops(torch, 16, 5)
    assert set(figures) | set(why_not) == {
        "torch_while_node", "torch_compiled_while_loop", "torch_host_loop", "torch_host_loop_compiled_sweep",
    }  # fmt: skip
    assert "torch_host_loop" in figures, why_not
    print({**figures, **why_not})  # what this torch can do, for the report
    for field in fields.values():
        assert abs(field - fields["torch_host_loop"]).max() < 1e-6


@pytest.mark.gpu
def test_each_torch_compile_mode_runs_on_the_fusion_chain():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    import numpy as np

    from benchmarks import fusion

    rng = np.random.default_rng(0)
    xv, yv = (rng.standard_normal(1 << 12).astype(np.float32) for _ in range(2))
    check_ = fusion._checker(xv, yv)
    tx, ty = torch.from_numpy(xv).cuda(), torch.from_numpy(yv).cuda()
    assert fusion._torch_graph_ms(torch, tx, ty, check_) > 0
    for mode in fusion.TORCH_MODES:
        assert fusion._torch_call_ms(torch, mode, tx, ty, check_) > 0, mode
