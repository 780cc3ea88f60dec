"""Reports as data: ``gpuacct.load(path)``.

Accepts

* the JSON report a process writes at exit (schema ``gpuacct.report/1``), and
* the JSONL step stream (one finalised step row per line) of a run that may still be running:
  a partial last line is ignored, and the summary and verdict are then computed here
  (``Run.provisional`` is True) with the same bands as the library.

``Run.steps`` is a pandas DataFrame when pandas is installed (else a list of dicts), one row per
step and device.  Nested objects are flattened with dots (``categories.data_wait``,
``walls.data``) and convenience columns are added: ``step_ms`` and ``<wall>_ms`` for the five
walls (compute, communication, data, launch, other).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

REPORT_SCHEMA = "gpuacct.report/1"
WALLS: Tuple[str, ...] = ("compute", "communication", "data", "launch", "other")
CATEGORIES: Tuple[str, ...] = ("compute", "comm_exposed", "copy_input", "copy_other", "data_wait",
                               "launch_gap", "host_other")
# Category -> wall (step_row.h: WallBreakdown::from).
CATEGORY_WALL: Dict[str, str] = {
    "compute": "compute", "comm_exposed": "communication", "copy_input": "data",
    "data_wait": "data", "launch_gap": "launch", "host_other": "other", "copy_other": "other",
}
# Verdict bands (run_summary.h VerdictBands, docs/accounting.md section 5): (bound, wall,
# high, moderate).  Every wall can be the verdict; compute wins when none of these reaches its
# moderate band, and is "high" from COMPUTE_HIGH on.
BANDS: Tuple[Tuple[str, str, float, float], ...] = (
    ("data", "data", 0.20, 0.05),
    ("launch", "launch", 0.15, 0.03),
    ("communication", "communication", 0.15, 0.03),
    ("other", "other", 0.25, 0.10),
)
COMPUTE_HIGH = 0.80
# The word a headline uses for each bound ("HIGHLY host-bound").
BOUND_WORD: Dict[str, str] = {"data": "data", "launch": "launch",
                              "communication": "communication", "other": "host"}


class ReportError(ValueError):
    """The file is not a gpuacct report or step stream."""


@dataclass
class Run:
    """One process's results."""

    path: str
    kind: str  # "report" (final JSON) or "stream" (JSONL, possibly still being written)
    steps: Any  # pandas.DataFrame, or List[Dict[str, Any]] without pandas
    summary: Dict[str, Any]
    verdict: Dict[str, Any]
    report: Dict[str, Any] = field(default_factory=dict)  # the whole JSON (kind == "report")
    provisional: bool = False  # summary/verdict computed here from the rows seen so far
    partial_lines: int = 0  # unparsable lines skipped (a stream's unfinished last line)

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """Step rows as a list of flat dicts, whether or not pandas is installed."""
        if isinstance(self.steps, list):
            return self.steps
        return self.steps.to_dict("records")

    @property
    def bound(self) -> str:
        return str(self.verdict.get("bound", "none"))

    def __repr__(self) -> str:
        return (f"Run(path={self.path!r}, kind={self.kind!r}, steps={len(self.rows)}, "
                f"bound={self.bound!r}{', provisional' if self.provisional else ''})")


# --- rows --------------------------------------------------------------------------------------

def _num(v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, dict):  # {"ns": ...} style
        for k in ("ns", "value", "total_ns"):
            if k in v:
                return _num(v[k])
    return 0.0


def _flatten(obj: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def row_walls_ns(row: Dict[str, Any]) -> Dict[str, float]:
    """The five walls of a raw (nested) step row, in ns; from ``walls`` or else ``categories``."""
    walls = row.get("walls")
    if isinstance(walls, dict) and any(w in walls for w in WALLS):
        return {w: _num(walls.get(w, 0)) for w in WALLS}
    out = {w: 0.0 for w in WALLS}
    cats = row.get("categories") or {}
    for c, w in CATEGORY_WALL.items():
        out[w] += _num(cats.get(c, 0))
    return out


def row_duration_ns(row: Dict[str, Any]) -> float:
    if "duration_ns" in row:
        return _num(row["duration_ns"])
    for b, e in (("window_begin_ns", "window_end_ns"), ("window_begin", "window_end")):
        if b in row and e in row:
            return _num(row[e]) - _num(row[b])
    return sum(row_walls_ns(row).values())


def flat_row(row: Dict[str, Any]) -> Dict[str, Any]:
    flat = _flatten(row)
    flat["step_ms"] = row_duration_ns(row) / 1e6
    for w, ns in row_walls_ns(row).items():
        flat[f"{w}_ms"] = ns / 1e6
    return flat


def _is_row(obj: Any) -> bool:
    return isinstance(obj, dict) and "step_index" in obj and (
        "categories" in obj or "walls" in obj or "duration_ns" in obj)


def _frame(rows: List[Dict[str, Any]]) -> Any:
    flat = [flat_row(r) for r in rows]
    try:
        import pandas as pd  # noqa: WPS433 - optional dependency
    except ImportError:
        return flat
    return pd.DataFrame(flat)


# --- summary computed from rows (streams) ------------------------------------------------------

def _percentile(values: List[float], p: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    pos = (len(v) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize_rows(rows: Iterable[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(summary, verdict) of raw step rows, following the library's rules: warm-up rows apart,
    a step's time is its slowest device's window, wall shares over summed rows, verdict from
    the data / launch / communication / other bands (severity first, then share)."""
    rows = list(rows)
    step_ms: Dict[int, float] = {}
    warm = set()
    wall_ns = {w: 0.0 for w in WALLS}
    n_rows = 0
    gpu_busy = 0.0
    kernels = 0.0
    launches = 0.0
    cats = {c: 0.0 for c in CATEGORIES}
    has_busy = False
    for r in rows:
        idx = int(_num(r.get("step_index", 0)))
        if r.get("warmup"):
            warm.add(idx)
            continue
        n_rows += 1
        for w, ns in row_walls_ns(r).items():
            wall_ns[w] += ns
        busy = r.get("gpu_busy_ns", r.get("gpu_busy"))
        has_busy = has_busy or busy is not None
        gpu_busy += _num(busy or 0)
        kernels += _num(r.get("kernels", 0))
        for c in CATEGORIES:
            cats[c] += _num((r.get("categories") or {}).get(c, 0))
        if idx not in step_ms:
            launches += _num(r.get("launches", 0))
        step_ms[idx] = max(step_ms.get(idx, 0.0), row_duration_ns(r) / 1e6)
    durations = list(step_ms.values())
    total = sum(wall_ns.values())
    shares = {w: (wall_ns[w] / total if total > 0 else 0.0) for w in WALLS}
    mean = sum(durations) / len(durations) if durations else 0.0
    # Same layout as the report's "summary" (analysis/report/report.cc).
    summary: Dict[str, Any] = {
        "steps": len(step_ms), "warmup_steps": len(warm), "rows": n_rows,
        "step_time_ms": {"p50": _percentile(durations, 50), "p90": _percentile(durations, 90),
                         "p99": _percentile(durations, 99), "mean": mean},
        "walls": {w: {"ns": int(wall_ns[w]), "share": shares[w]} for w in WALLS},
        "categories_ns": {c: int(v) for c, v in cats.items()},
        "gpu_busy_ns": int(gpu_busy),
        "gpu_busy_share": gpu_busy / total if total > 0 else 0.0,
        "compute_share": shares["compute"],
        "kernels": int(kernels), "launches": int(launches),
    }
    verdict: Dict[str, Any] = {"bound": "none", "severity": "none", "share": 0.0,
                               "mean_step_ms": mean, "what_if_step_ms": 0.0, "notes": []}
    if not step_ms:
        verdict["headline"] = "No complete step was seen: nothing to account."
    elif gpu_busy == 0 and has_busy:
        verdict["headline"] = "No GPU activity was recorded: steps were timed on the host only."
    else:
        best: Optional[Tuple[int, float, str, str]] = None
        for bound, wall, high, moderate in BANDS:
            s = shares[wall]
            sev = 2 if s >= high else 1 if s >= moderate else 0
            if sev and (best is None or (sev, s) > (best[0], best[1])):
                best = (sev, s, bound, wall)
        if best is None:
            verdict.update(bound="compute", share=shares["compute"], what_if_step_ms=mean,
                           severity="high" if shares["compute"] >= COMPUTE_HIGH else "moderate",
                           headline=f"Compute-bound: {shares['compute']:.1%} of step time the "
                                    "GPU computes.")
        else:
            sev, s, bound, wall = best
            per_step = wall_ns[wall] / 1e6 / max(n_rows, 1)
            level = "HIGHLY" if sev == 2 else "MODERATELY"
            verdict.update(bound=bound, severity="high" if sev == 2 else "moderate", share=s,
                           what_if_step_ms=max(0.0, mean - per_step),
                           headline=f"{level} {BOUND_WORD[bound]}-bound: {s:.1%} of step time.")
        for bound, wall, high, moderate in BANDS:
            s = shares[wall]
            if (best is None or bound != best[2]) and s >= moderate:
                level = "high" if s >= high else "moderate"
                verdict["notes"].append(f"Also {level}: the {wall} wall takes {s:.1%} of step "
                                        "time.")
    return summary, verdict


# --- loading -----------------------------------------------------------------------------------

def _find_steps(report: Dict[str, Any]) -> List[Dict[str, Any]]:
    for key in ("steps", "step_rows", "rows"):
        v = report.get(key)
        if isinstance(v, list):
            return [r for r in v if isinstance(r, dict)]
        if isinstance(v, dict):  # {"rows": [...]} style
            for sub in ("rows", "steps"):
                if isinstance(v.get(sub), list):
                    return [r for r in v[sub] if isinstance(r, dict)]
    return []


def _find_verdict(report: Dict[str, Any], summary: Dict[str, Any]) -> Dict[str, Any]:
    for holder in (report, summary):
        v = holder.get("verdict")
        if isinstance(v, dict):
            return v
    return {}


def _load_report(path: str, data: Dict[str, Any]) -> Run:
    schema = data.get("schema")
    if schema != REPORT_SCHEMA:
        raise ReportError(f"{path}: not a gpuacct report (schema {schema!r}, "
                          f"expected {REPORT_SCHEMA!r})")
    rows = _find_steps(data)
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    verdict = _find_verdict(data, summary)
    provisional = False
    if not summary and rows:
        summary, verdict = summarize_rows(rows)
        provisional = True
    return Run(path=path, kind="report", steps=_frame(rows), summary=summary, verdict=verdict,
               report=data, provisional=provisional)


def _load_stream(path: str, text: str) -> Run:
    rows: List[Dict[str, Any]] = []
    header: Dict[str, Any] = {}
    bad = 0
    lines = text.split("\n")
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            bad += 1  # the unfinished last line of a running job (or a torn write): skip it
            continue
        if _is_row(obj):
            rows.append(obj)
        elif isinstance(obj, dict) and isinstance(obj.get("step"), dict) and _is_row(obj["step"]):
            rows.append(obj["step"])
        elif isinstance(obj, dict):
            header.update(obj)  # header / trailer lines (schema, metadata, summary)
    if not rows and not header:
        raise ReportError(f"{path}: no gpuacct step rows found")
    summary, verdict = summarize_rows(rows)
    if isinstance(header.get("summary"), dict):  # a finished stream may end with the summary
        summary = header["summary"]
        verdict = _find_verdict(header, summary) or verdict
        provisional = False
    else:
        provisional = True
    return Run(path=path, kind="stream", steps=_frame(rows), summary=summary, verdict=verdict,
               report=header, provisional=provisional, partial_lines=bad)


def load(path: Union[str, "os.PathLike[str]"]) -> Run:
    """Load a gpuacct JSON report or JSONL step stream (see the module docstring)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        found = find_reports(p)
        if not found:
            raise ReportError(f"{p}: no gpuacct report in this directory")
        p = found[-1]
    with open(p, "rb") as f:
        raw = f.read()
    if p.endswith(".gz") or raw[:2] == b"\x1f\x8b":
        import gzip
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8", "replace")
    stripped = text.strip()
    if not stripped:
        raise ReportError(f"{p}: empty file")
    if not p.endswith(".jsonl"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and "schema" in data and not _is_row(data):
            return _load_report(p, data)
    return _load_stream(p, text)


def is_report_file(path: str) -> bool:
    """A JSON object that names the gpuacct report schema (the key may come anywhere)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
            if head not in (b"{", b" ", b"\n", b"\t", b"\r"):
                return False
            return REPORT_SCHEMA.encode() in head + f.read()
    except OSError:
        return False


def find_reports(directory: str, newer_than: float = 0.0) -> List[str]:
    """JSON reports under ``directory`` (not recursive), oldest first."""
    out: List[Tuple[float, str]] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        if not name.endswith(".json"):
            continue
        full = os.path.join(directory, name)
        try:
            mtime = os.path.getmtime(full)
        except OSError:
            continue
        if mtime + 1e-3 >= newer_than and is_report_file(full):
            out.append((mtime, full))
    return [p for _, p in sorted(out)]
