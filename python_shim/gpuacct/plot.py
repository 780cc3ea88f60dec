"""Pictures: a stacked bar per step of the five walls (ms), the step time as a line, the verdict
in the title.  matplotlib is optional; without it the functions raise MissingDependency with
an install hint."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple, Union

from .results import WALLS, ReportError, Run, load

# The largest image side in pixels (width x dpi, height x dpi): Agg's own limit is 2^16, and a
# picture of one bar per step needs far less.
MAX_PIXELS = 20000

# One colour per wall, readable in print and for the common colour-vision deficiencies.
COLORS: Dict[str, str] = {
    "compute": "#4C9F38",
    "communication": "#8E44AD",
    "data": "#E67E22",
    "launch": "#2E86C1",
    "other": "#95A5A6",
}


class MissingDependency(RuntimeError):
    pass


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise MissingDependency(
            "gpuacct plot needs matplotlib: pip install matplotlib "
            "(or apt install python3-matplotlib)") from e
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    return plt


def per_step_walls(run: Run, device: Optional[int] = None
                   ) -> Tuple[List[int], Dict[str, List[float]], List[float], List[bool]]:
    """(step indices, wall ms per step, step ms per step, warm-up flags).

    With several devices a step's walls are averaged over devices and its time is the slowest
    device's window (as in the summary); ``device`` selects one device instead."""
    acc: Dict[int, Dict[str, Any]] = {}
    for r in run.rows:
        if device is not None and int(r.get("device", 0)) != device:
            continue
        idx = int(r.get("step_index", 0))
        a = acc.setdefault(idx, {"n": 0, "step": 0.0, "warm": False,
                                 **{w: 0.0 for w in WALLS}})
        a["n"] += 1
        a["step"] = max(a["step"], float(r.get("step_ms", 0.0) or 0.0))
        a["warm"] = a["warm"] or bool(r.get("warmup", False))
        for w in WALLS:
            a[w] += float(r.get(f"{w}_ms", 0.0) or 0.0)
    idxs = sorted(acc)
    walls = {w: [acc[i][w] / acc[i]["n"] for i in idxs] for w in WALLS}
    return idxs, walls, [acc[i]["step"] for i in idxs], [acc[i]["warm"] for i in idxs]


def _title(run: Run) -> str:
    if not run.has_summary:
        return "no summary yet [in progress]"
    v = run.verdict
    bound = v.get("bound", "none")
    share = v.get("share")
    sev = v.get("severity")
    if bound == "none":
        text = "verdict: none"
    elif bound == "compute":
        text = "verdict: compute-bound"
    else:
        text = f"verdict: {bound}-bound"
        if sev and sev != "none":
            text += f" ({sev})"
    if isinstance(share, (int, float)) and bound != "none":
        text += f", {share:.0%} of step time"
    if run.provisional:
        text += " [in progress]"
    return text


def plot_walls(source: Union[str, Run], output: Optional[str] = None, *,
               device: Optional[int] = None, width: float = 10.0, height: float = 5.0,
               dpi: int = 100, title: Optional[str] = None) -> Any:
    """Draw the per-step wall chart; save it to ``output`` when given.  Returns the Figure.
    Raises ValueError for a size out of range and ReportError for a device the run lacks."""
    for name, value in (("width", width), ("height", height), ("dpi", dpi)):
        if not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a number > 0, not {value!r}")
    if width * dpi > MAX_PIXELS or height * dpi > MAX_PIXELS:
        raise ValueError(f"{width:g} x {height:g} inches at {dpi} dpi is "
                         f"{width * dpi:.0f} x {height * dpi:.0f} pixels; at most {MAX_PIXELS} "
                         "a side")
    run = source if isinstance(source, Run) else load(source)
    if device is not None:
        devices = sorted({int(r.get("device", 0)) for r in run.rows})
        if device not in devices:
            raise ReportError(f"{run.path}: no device {device} in this run (devices: "
                              f"{', '.join(map(str, devices)) or 'none'}; -1 is host-only rows)")
    plt = _pyplot()
    idxs, walls, step_ms, warm = per_step_walls(run, device)
    fig, ax = plt.subplots(figsize=(width, height), dpi=dpi)
    try:
        bottom = [0.0] * len(idxs)
        bar_w = 0.8 if len(idxs) < 400 else 1.0
        for w in WALLS:
            vals = walls[w]
            ax.bar(idxs, vals, bottom=bottom, width=bar_w, color=COLORS[w], label=w,
                   linewidth=0)
            bottom = [b + v for b, v in zip(bottom, vals)]
        if idxs:
            ax.plot(idxs, step_ms, color="black", linewidth=1.2, marker="." if len(idxs) < 60
                    else None, label="step time")
            warm_idx = [i for i, f in zip(idxs, warm) if f]
            if warm_idx:
                ax.axvspan(min(warm_idx) - 0.5, max(warm_idx) + 0.5, color="black", alpha=0.06,
                           label="warm-up")
        else:
            ax.text(0.5, 0.5, "no steps", transform=ax.transAxes, ha="center", va="center")
        ax.set_xlabel("step")
        ax.set_ylabel("time (ms)")
        head = title or f"gpuacct: {os.path.basename(run.path)}"
        ax.set_title(f"{head}\n{_title(run)}", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        order = sorted(range(len(labels)), key=lambda i: (labels[i] in WALLS,
                                                          -WALLS.index(labels[i])
                                                          if labels[i] in WALLS else 0))
        ax.legend([handles[i] for i in order], [labels[i] for i in order], loc="upper left",
                  bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)  # same order as stack
        ax.grid(axis="y", alpha=0.3)
        ax.set_ylim(bottom=0)
        fig.tight_layout()
        if output:
            fig.savefig(output, dpi=dpi)
    except Exception:
        plt.close(fig)
        raise
    if output:
        plt.close(fig)
    return fig
