"""Terminal summary of a loaded run (used when the C++ ``gpuacct report`` is not available)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .results import WALLS, Run


def _get(d: Dict[str, Any], *paths: str, default: Any = None) -> Any:
    """First present value among dotted paths."""
    for path in paths:
        cur: Any = d
        ok = True
        for part in path.split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                ok = False
                break
        if ok and cur is not None:
            return cur
    return default


def wall_shares(run: Run) -> Dict[str, float]:
    """Share of summary step time per wall, from the library's summary ({} without one)."""
    out: Dict[str, float] = {}
    walls = _get(run.summary, "walls", default={})
    for w in WALLS:
        v = walls.get(w) if isinstance(walls, dict) else None
        if isinstance(v, dict):
            v = v.get("share")
        if isinstance(v, (int, float)):
            out[w] = float(v)
    return out


def _bar(share: float, width: int = 30) -> str:
    n = int(round(max(0.0, min(1.0, share)) * width))
    return "#" * n + "." * (width - n)


def render(run: Run, title: Optional[str] = None) -> str:
    s, v = run.summary, run.verdict
    lines: List[str] = []
    meta = _get(run.report, "run", "metadata", default=None) or run.report or {}
    who = []
    for key in ("hostname", "pid", "rank"):
        val = meta.get(key) if isinstance(meta, dict) else None
        if val not in (None, "", -1):
            who.append(f"{key} {val}")
    head = title or f"gpuacct: {run.path}"
    if who:
        head += "  (" + ", ".join(who) + ")"
    if run.provisional:
        head += "  [in progress: provisional]"
    lines.append(head)
    if not run.has_summary:
        lines.append(f"{len(run.rows)} step rows so far; no summary yet (the library writes one "
                     "once rows are finalised, at most once a second)")
        lines.extend(_loss_lines(run))
        return "\n".join(lines) + "\n"
    if run.summary_source != "library":
        lines.append(f"summary of all {run.summary_rows} step rows, by {run.summary_source} (the "
                     "stream has no closing summary line)")
    elif run.provisional and run.summary_rows is not None:
        lines.append(f"summary of the first {run.summary_rows} step rows (as the library "
                     "computed it while the job ran)")
        if run.rows_behind > 0:
            lines.append(f"  {run.rows_behind} later step rows are not in it (a running job, or "
                         "one killed before its closing line): gpuacct.load(path, "
                         "summarize_all=True) or `gpuacct report PATH` summarises them all")
    steps = _get(s, "steps", default=0)
    warm = _get(s, "warmup_steps", default=0)
    p50 = _get(s, "step_time_ms.p50", "step_ms.p50", default=0.0)
    p90 = _get(s, "step_time_ms.p90", "step_ms.p90", default=0.0)
    p99 = _get(s, "step_time_ms.p99", "step_ms.p99", default=0.0)
    mean = _get(s, "step_time_ms.mean", "step_ms.mean", default=0.0)
    lines.append(f"steps: {steps} (+{warm} warm-up)   step time ms: p50 {p50:.2f}  p90 {p90:.2f}"
                 f"  p99 {p99:.2f}  mean {mean:.2f}")
    shares = wall_shares(run)
    for w in WALLS:
        lines.append(f"  {w:<14} {shares.get(w, 0.0) * 100:5.1f}%  {_bar(shares.get(w, 0.0))}")
    bound = v.get("bound", "none")
    sev = v.get("severity", "")
    lines.append(f"verdict: {bound}" + (f" ({sev})" if sev and sev != "none" else ""))
    if v.get("headline"):
        lines.append(f"  {v['headline']}")
    if v.get("recommendation"):
        lines.append(f"  -> {v['recommendation']}")
    what_if = v.get("what_if_step_ms")
    if bound not in ("none", "compute") and isinstance(what_if, (int, float)) and mean:
        lines.append(f"  without the {bound} wall: mean step {mean:.2f} ms -> {what_if:.2f} ms")
    for note in v.get("notes", []) or []:
        lines.append(f"  note: {note}")
    lines.extend(_loss_lines(run))
    return "\n".join(lines) + "\n"


def _loss_lines(run: Run) -> List[str]:
    out = []
    if run.rows_lost:
        out.append(f"  ! data loss: {run.rows_lost} step rows could not be written to the "
                   "stream (full disk?)")
    for name, value in sorted(run.data_loss_counters.items()):
        out.append(f"  ! data loss: {name}: {value}")
    return out
