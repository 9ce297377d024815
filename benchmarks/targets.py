"""Each row's target, declared once, in the code that measures it.

A section builds a row (its figures: ``tensorplay`` and the references beside
it, ``torch``, ``jax``, ``driver``...), then calls one of these, which set
``row["target"]`` (what is asked, and this run's figure against it) and
``row["met"]``: True, False, or None where the row cannot be judged in this
run (its reference did not run, or the row is a measurement with no target).
``benchmarks/run.py`` prints both, lists the misses, and on the simulator,
whose times say nothing of a GPU's, judges nothing (``unjudged``).
``benchmarks/report.py`` writes RESULTS.md's tables from the JSON, targets
and verdicts included, so that the two never differ.

>>> row = {"tensorplay": 9.0, "torch": 10.0, "lower_is_better": True}
>>> at_most(row, 1.0)
>>> row["target"], row["met"]
('<= 1x torch (0.90x here)', True)
>>> row = {"tensorplay": 70.0, "torch": 100.0, "lower_is_better": False}
>>> at_least(row, 0.8)
>>> row["target"], row["met"]
('>= 80% of torch (70% here)', False)
"""

from __future__ import annotations

__all__ = ["at_least", "at_most", "below", "judge", "measurement", "unjudged"]


def judge(row: dict, met: bool | None, target: str) -> None:
    """Set a row's ``target`` text and its verdict ``met`` (None: not judged here)."""
    row["target"] = target
    row["met"] = None if met is None else bool(met)


def _figures(row: dict, of: str, who: str) -> tuple[float | None, float | None]:
    mine, ref = row.get(who), row.get(of)
    return (mine, ref) if mine is not None and ref else (mine, None)


def at_most(
    row: dict, bound: float, of: str = "torch", who: str = "tensorplay", note: str = "", label: str | None = None
) -> None:
    """Target: ``row[who] <= bound * row[of]`` (a time: lower is better); ``label``
    names the reference in the text (``of`` by default)."""
    mine, ref = _figures(row, of, who)
    label = label or of.replace("_", " ")
    if ref is None:
        judge(row, None, f"<= {bound:g}x {label} (no {label} figure in this run){note}")
        return
    ratio = mine / ref
    judge(row, ratio <= bound, f"<= {bound:g}x {label} ({ratio:.2f}x here){note}")


def at_least(
    row: dict, fraction: float, of: str = "torch", who: str = "tensorplay", note: str = "", label: str | None = None
) -> None:
    """Target: ``row[who] >= fraction * row[of]`` (a rate: higher is better)."""
    mine, ref = _figures(row, of, who)
    label = label or of.replace("_", " ")
    if ref is None:
        judge(row, None, f">= {fraction:.0%} of {label} (no {label} figure in this run){note}")
        return
    share = mine / ref
    judge(row, share >= fraction, f">= {fraction:.0%} of {label} ({share:.0%} here){note}")


def below(row: dict, bound: float, unit: str, who: str = "tensorplay", note: str = "") -> None:
    """Target: ``row[who] <= bound`` in ``unit`` (an absolute figure)."""
    mine = row.get(who)
    if mine is None:
        judge(row, None, f"<= {bound:g} {unit} (not measured in this run){note}")
        return
    judge(row, mine <= bound, f"<= {bound:g} {unit} ({mine:.3g} here){note}")


def measurement(row: dict, what: str) -> None:
    """A row that is a measurement or a reference for another row: no target."""
    judge(row, None, f"no target: {what}")


def unjudged(rows: list, why: str) -> None:
    """Withdraw every verdict (the simulator's times say nothing of a GPU's), saying why."""
    for row in rows:
        if row.get("met") is not None:
            row["met"] = None
            row["target"] = f"{row['target']} [not judged: {why}]"
