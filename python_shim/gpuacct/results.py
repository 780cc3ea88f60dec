"""Reports as data: ``gpuacct.load(path)``.

Accepts

* the JSON report a process writes at exit (schema ``gpuacct.report/1``), and
* the JSONL step stream (one finalised step row per line) of a run that may still be running:
  a partial last line is ignored.

The summary and verdict are always the ones the C++ library computed -- this package never
computes its own.  A report carries them; a stream carries summary lines: provisional ones the
library writes while the job runs (at most once a second, over the rows finalised so far) and
the final one at a clean exit.  ``load`` shows the stream's latest summary line
(``Run.provisional`` says whether it is final, ``Run.summary_rows`` how many step rows it
covers); a stream with no summary line yet has none (``Run.has_summary`` is False and the
verdict is empty).  Gap lines (step rows the library lost on a full disk) are counted in
``Run.rows_lost``.

A stream whose latest summary line covers fewer rows than it holds -- a running job, or one
killed with SIGKILL, which writes no closing line -- says so (``Run.rows_behind``).
``load(path, summarize_all=True)`` then asks the C++ tool (``gpuacct analyze`` of the stream,
the one C++ summary) for the summary and verdict of all its rows; without the tool it keeps the
latest summary line.

``Run.steps`` is a pandas DataFrame when pandas is installed (else a list of dicts), one row per
step and device.  Nested objects are flattened with dots (``categories.data_wait``,
``walls.data``) and convenience columns are added: ``step_ms`` and ``<wall>_ms`` for the five
walls (compute, communication, data, launch, other), from the row's own ``walls``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from .rank_files import kinds_in, rank_file_name

REPORT_SCHEMA = "gpuacct.report/1"
STREAM_SCHEMA = "gpuacct.steps/1"  # a step stream's header line (inject/pipeline/pipeline.cc)
WALLS: Tuple[str, ...] = ("compute", "communication", "data", "launch", "other")


class ReportError(ValueError):
    """The file is not a gpuacct report or step stream."""


@dataclass
class Run:
    """One process's results."""

    path: str
    kind: str  # "report" (final JSON) or "stream" (JSONL, possibly still being written)
    steps: Any  # pandas.DataFrame, or List[Dict[str, Any]] without pandas
    summary: Dict[str, Any]  # the library's summary ({} while a stream has no summary line)
    verdict: Dict[str, Any]  # the library's verdict ({} likewise)
    report: Dict[str, Any] = field(default_factory=dict)  # the whole JSON, or a stream's header
    # True while the summary is not the run's final one: a running job's latest summary line,
    # or a stream with no summary line yet.
    provisional: bool = False
    summary_rows: Optional[int] = None  # step rows the summary covers (all devices, warm-up too)
    stats: Dict[str, int] = field(default_factory=dict)  # non-zero counters with the summary
    data_loss_counters: Dict[str, int] = field(default_factory=dict)  # those of them that lose data
    data_loss: bool = False  # the library lost events (data_loss_counters) or stream rows
    rows_lost: int = 0  # stream rows lost on a full disk (the stream's gap lines)
    gaps: List[Dict[str, Any]] = field(default_factory=list)  # the gap lines themselves
    partial_lines: int = 0  # unparsable lines skipped (a stream's unfinished last line)
    # Who computed the summary: "library" (a report or a summary line) or "gpuacct analyze" (the
    # C++ tool over all of a stream's rows, load(summarize_all=True)).
    summary_source: str = "library"

    @property
    def rows_behind(self) -> int:
        """A stream's step rows that its summary does not cover yet (0 for a report)."""
        if self.kind != "stream" or self.summary_rows is None:
            return 0
        return max(0, len(self.rows) - self.summary_rows)

    @property
    def rows(self) -> List[Dict[str, Any]]:
        """Step rows as a list of flat dicts, whether or not pandas is installed."""
        if isinstance(self.steps, list):
            return self.steps
        return self.steps.to_dict("records")

    @property
    def has_summary(self) -> bool:
        return bool(self.summary) and bool(self.verdict)

    @property
    def bound(self) -> str:
        return str(self.verdict.get("bound", "none"))

    def __repr__(self) -> str:
        state = ", provisional" if self.provisional else ""
        if not self.has_summary:
            state += ", no summary yet"
        return (f"Run(path={self.path!r}, kind={self.kind!r}, steps={len(self.rows)}, "
                f"bound={self.bound!r}{state})")


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
    """The five walls of a raw (nested) step row, in ns, as the library wrote them."""
    walls = row.get("walls")
    walls = walls if isinstance(walls, dict) else {}
    return {w: _num(walls.get(w, 0)) for w in WALLS}


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


class StepRows(list):  # type: ignore[type-arg]
    """``Run.steps`` without pandas: a list of flat row dicts.  Indexed by a column name or a
    list of names (as a DataFrame is), it says what is missing instead of a bare TypeError."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, (str, list, tuple)):
            raise TypeError("run.steps is a list of row dicts: pandas is not installed, so "
                            "there are no DataFrame columns (pip install pandas, or "
                            "pip install './python_shim[data]')")
        return super().__getitem__(key)


def _frame(rows: List[Dict[str, Any]]) -> Any:
    flat = [flat_row(r) for r in rows]
    try:
        import pandas as pd  # noqa: WPS433 - optional dependency
    except ImportError:
        return StepRows(flat)
    return pd.DataFrame(flat)


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


def _counters(stats: Any, severity: Optional[str] = None) -> Dict[str, int]:
    """Non-zero counters of a report's or a summary line's ``stats`` (of one severity)."""
    out: Dict[str, int] = {}
    for s in stats if isinstance(stats, list) else []:
        if not isinstance(s, dict) or severity not in (None, s.get("severity")):
            continue
        if isinstance(s.get("value"), (int, float)) and s["value"]:
            out[str(s.get("name", ""))] = int(s["value"])
    return out


def _what_it_is(data: Dict[str, Any]) -> str:
    """For a JSON object that is not a report or stream: what it is, and what reads it."""
    schema = data.get("schema")
    if schema == "gpuacct.job/1":
        return (" (a job view, gpuacct.job/1: `gpuacct job` prints it from the ranks' outputs, "
                "gpuacct.job reads their export)")
    if "traceEvents" in data:
        return " (a profiler trace: `gpuacct analyze` accounts it)"
    if schema is not None:
        return f" (schema {schema!r}, expected {REPORT_SCHEMA!r} or {STREAM_SCHEMA!r})"
    return ""


def _load_report(path: str, data: Dict[str, Any]) -> Run:
    schema = data.get("schema")
    if schema != REPORT_SCHEMA:
        raise ReportError(f"{path}: not a gpuacct report{_what_it_is(data)}")
    rows = _find_steps(data)
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    verdict = _find_verdict(data, summary)
    return Run(path=path, kind="report", steps=_frame(rows), summary=summary, verdict=verdict,
               report=data, summary_rows=len(rows), stats=_counters(data.get("stats")),
               data_loss_counters=_counters(data.get("stats"), "data_loss"),
               data_loss=bool(data.get("data_loss", False)))


def _is_summary_line(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("summary"), dict)


def _load_stream(path: str, text: str) -> Run:
    rows: List[Dict[str, Any]] = []
    header: Dict[str, Any] = {}
    latest: Optional[Dict[str, Any]] = None  # the last summary line
    gaps: List[Dict[str, Any]] = []
    bad = 0
    for line in text.split("\n"):
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
        elif _is_summary_line(obj):
            latest = obj
        elif isinstance(obj, dict) and isinstance(obj.get("gap"), dict):
            gaps.append(obj["gap"])
        elif isinstance(obj, dict):
            header.update(obj)  # the header line (schema, host, pid, rank)
    if not rows and latest is None and header.get("schema") != STREAM_SCHEMA:
        # Any other JSON (a job view, a trace, a config): not ours, and never an empty stream.
        raise ReportError(f"{path}: not a gpuacct report or step stream{_what_it_is(header)}")
    rows_lost = sum(int(_num(g.get("rows_lost", 0))) for g in gaps)
    if latest is None:
        # Nothing computed yet (no row finalised, or the job runs for less than a second):
        # no summary and no verdict rather than one of our own.
        return Run(path=path, kind="stream", steps=_frame(rows), summary={}, verdict={},
                   report=header, provisional=True, data_loss=rows_lost > 0,
                   rows_lost=rows_lost, gaps=gaps, partial_lines=bad)
    summary = latest["summary"]
    verdict = _find_verdict(latest, summary)
    step_rows = latest.get("step_rows")
    return Run(path=path, kind="stream", steps=_frame(rows), summary=summary, verdict=verdict,
               report=header, provisional=bool(latest.get("provisional", False)),
               summary_rows=int(step_rows) if isinstance(step_rows, (int, float)) else None,
               stats=_counters(latest.get("stats")),
               data_loss_counters=_counters(latest.get("stats"), "data_loss"),
               data_loss=bool(latest.get("data_loss", False)) or rows_lost > 0,
               rows_lost=rows_lost, gaps=gaps, partial_lines=bad)


def _summarize_with_cli(run: Run) -> Run:
    """The C++ summary of all of a stream's rows (``gpuacct analyze STREAM``), or ``run`` as it
    is when the tool is not found or fails."""
    import subprocess
    import tempfile

    from . import _lib
    from .launcher import find_cli
    cli = find_cli(_lib.find_library())
    if cli is None:
        return run
    with tempfile.TemporaryDirectory(prefix="gpuacct_load_") as out:
        try:
            res = subprocess.run([cli, "analyze", run.path, "--out", out], capture_output=True,
                                 timeout=120, check=False)
        except (OSError, subprocess.SubprocessError):
            return run
        found = kinds_in(out).get("report", [])  # analyze writes <stem>.report.json
        if res.returncode != 0 or len(found) != 1:
            return run
        with open(found[0], encoding="utf-8") as f:
            report = json.load(f)
    summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    run.summary, run.verdict = summary, _find_verdict(report, summary)
    run.summary_rows = len(_find_steps(report))
    run.stats = _counters(report.get("stats"))
    run.data_loss_counters = _counters(report.get("stats"), "data_loss")
    run.data_loss = bool(report.get("data_loss", False)) or run.rows_lost > 0
    run.summary_source = "gpuacct analyze"
    return run


def load(path: Union[str, "os.PathLike[str]"], summarize_all: bool = False) -> Run:
    """Load a gpuacct JSON report or JSONL step stream (see the module docstring).
    summarize_all: for a stream whose summary lags its rows, the C++ tool's summary of all."""
    p = os.fspath(path)
    if os.path.isdir(p):
        # A rank's folder: its newest report, else (a job still running, or killed) its newest
        # step stream.
        found = find_reports(p) or find_step_streams(p)
        if not found:
            raise ReportError(f"{p}: no gpuacct report or step stream in this directory")
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
    if rank_file_name(os.path.basename(p)).kind != "step_stream":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and "schema" in data and not _is_row(data):
            return _load_report(p, data)
    run = _load_stream(p, text)
    if summarize_all and run.rows and (run.summary_rows is None and run.provisional
                                       or run.rows_behind > 0):
        run = _summarize_with_cli(run)
    return run


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


def _newest_first_of(paths: List[str], newer_than: float) -> List[str]:
    out: List[Tuple[float, str]] = []
    for full in paths:
        try:
            mtime = os.path.getmtime(full)
        except OSError:
            continue
        if mtime + 1e-3 >= newer_than:
            out.append((mtime, full))
    return [p for _, p in sorted(out)]


def find_reports(directory: str, newer_than: float = 0.0) -> List[str]:
    """JSON reports under ``directory`` (not recursive), oldest first: ``<base>.report.json``,
    and a ``<base>.json`` whose content is a report (the library's report before its name was
    settled; gpuacct/rank_files.py)."""
    kinds = kinds_in(directory)
    named = [p for p in kinds.get("report", []) if is_report_file(p)]
    old = [p for p in kinds.get("by_content", []) if p.endswith(".json") and is_report_file(p)]
    return _newest_first_of(named + old, newer_than)


def find_step_streams(directory: str, newer_than: float = 0.0) -> List[str]:
    """Step streams under ``directory`` (not recursive), oldest first."""
    kinds = kinds_in(directory)
    return _newest_first_of(kinds.get("step_stream", []) +
                            [p for p in kinds.get("by_content", []) if p.endswith(".jsonl")],
                            newer_than)
