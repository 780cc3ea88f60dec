"""gpuacct.load: final JSON reports and in-progress JSONL streams.  The summary and verdict
shown are always the library's (the report's, or the stream's latest summary line)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import gpuacct
from gpuacct.results import ReportError, load
from gpuacct.summary import render
from conftest import (STREAM_HEADER, WALLS, build_dir, golden_report, make_report, make_row,
                      make_rows,
                      summary_line)


def test_load_json_report(report_file: Path) -> None:
    run = gpuacct.load(report_file)
    rep = golden_report()
    assert run.kind == "report"
    assert not run.provisional
    rows = run.rows
    assert len(rows) == 24
    assert [r["step_index"] for r in rows] == list(range(24))
    r = rows[3]
    # Flattened nested fields and convenience columns in ms.
    assert r["categories.data_wait"] + r["categories.copy_input"] == r["walls.data"]
    assert r["data_ms"] == pytest.approx(r["walls.data"] / 1e6)
    assert r["step_ms"] == pytest.approx(r["duration_ns"] / 1e6)
    assert sum(r[f"{w}_ms"] for w in WALLS) == pytest.approx(r["step_ms"])
    # The report's own summary and verdict, as the C++ code wrote them.
    assert run.summary == rep["summary"] and run.verdict == rep["verdict"]
    assert run.summary["steps"] == 22 and run.summary["warmup_steps"] == 2
    assert run.bound == "data" and run.has_summary
    assert run.summary_rows == 24
    assert not run.data_loss and run.rows_lost == 0


def test_steps_is_dataframe_with_pandas(report_file: Path) -> None:
    pd = pytest.importorskip("pandas")  # pandas is optional; the list form is tested below
    run = load(report_file)
    assert isinstance(run.steps, pd.DataFrame)
    assert len(run.steps) == 24
    for col in ("step_index", "step_number", "device", "warmup", "window_begin_ns",
                "window_end_ns", "duration_ns", "gpu_busy_ns", "categories.compute",
                "walls.launch", "step_ms", "data_ms"):
        assert col in run.steps.columns, col
    # The usual analysis works without any conversion.
    steady = run.steps[~run.steps["warmup"]]
    assert len(steady) == 22
    assert steady["data_ms"].mean() > steady["launch_ms"].mean()


def test_steps_is_list_without_pandas(report_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    run = load(report_file)
    assert isinstance(run.steps, list)
    assert isinstance(run.steps[0], dict)
    assert run.steps[0]["step_index"] == 0


def test_load_stream_in_progress(stream_file: Path) -> None:
    run = load(stream_file)
    rep = golden_report()
    assert run.kind == "stream"
    assert run.provisional
    assert run.partial_lines == 1  # the cut last line is skipped, not an error
    assert run.report == STREAM_HEADER  # the header only: summary lines are not merged in
    assert len(run.rows) == 24
    # The summary line, as the library wrote it: nothing recomputed here.
    assert run.summary == rep["summary"] and run.verdict == rep["verdict"]
    assert run.summary_rows == 24
    assert run.verdict["severity"] == "high" and run.bound == "data"
    assert run.stats["steps_finalized"] > 0
    shares = {w: run.summary["walls"][w]["share"] for w in WALLS}
    assert sum(shares.values()) == pytest.approx(1.0)


def _write_stream(path: Path, lines) -> Path:
    path.write_text("".join(json.dumps(l) + "\n" for l in lines))
    return path


def test_stream_shows_its_latest_summary_line(tmp_path: Path) -> None:
    rows = make_rows(6)
    early = {"summary": {"steps": 1}, "verdict": {"bound": "launch", "headline": "early"},
             "provisional": True, "step_rows": 3, "data_loss": False, "stats": []}
    late = {"summary": {"steps": 4}, "verdict": {"bound": "data", "headline": "late"},
            "provisional": True, "step_rows": 6, "data_loss": True,
            "stats": [{"name": "host_records_dropped", "value": 5, "severity": "data_loss"},
                      {"name": "steps_finalized", "value": 6, "severity": "info"}]}
    run = load(_write_stream(tmp_path / "s.jsonl",
                             [STREAM_HEADER] + rows[:3] + [early] + rows[3:] + [late]))
    assert run.verdict == late["verdict"] and run.summary == late["summary"]
    assert run.provisional and run.summary_rows == 6
    assert run.data_loss and run.data_loss_counters == {"host_records_dropped": 5}
    assert run.stats == {"host_records_dropped": 5, "steps_finalized": 6}
    assert "! data loss: host_records_dropped: 5" in render(run)
    # The closing line of a clean exit is final.
    final = dict(late, provisional=False)
    run = load(_write_stream(tmp_path / "f.jsonl", [STREAM_HEADER] + rows + [early, final]))
    assert not run.provisional and run.verdict == late["verdict"]
    # A trailer of an older library (no "provisional" key) is final too.
    old = {"summary": late["summary"], "verdict": late["verdict"]}
    run = load(_write_stream(tmp_path / "o.jsonl", [STREAM_HEADER] + rows + [old]))
    assert not run.provisional and run.summary_rows is None


def test_stream_without_summary_line_has_no_verdict(tmp_path: Path) -> None:
    """Rows but no summary line yet: no verdict of our own, and it says so."""
    rows = make_rows(6, walls_ms={"compute": 10, "launch": 9})  # would be launch-bound
    run = load(_write_stream(tmp_path / "s.jsonl", [STREAM_HEADER] + rows))
    assert run.provisional and not run.has_summary
    assert run.summary == {} and run.verdict == {} and run.bound == "none"
    assert len(run.rows) == 6
    text = render(run)
    assert "no summary yet" in text and "launch" not in text
    assert "no summary yet" in repr(run)


def test_stream_gap_lines_count_lost_rows(tmp_path: Path) -> None:
    """Rows the library could not write on a full disk leave gap lines: counted, not merged
    into the header."""
    rows = make_rows(8)
    gap1 = {"gap": {"rows_lost": 2, "first_step_index": 2, "last_step_index": 3,
                    "error": "No space left on device"}}
    gap2 = {"gap": {"rows_lost": 1, "first_step_index": 6, "last_step_index": 6,
                    "error": "No space left on device"}}
    kept = rows[:2] + [gap1] + rows[4:6] + [gap2] + rows[7:]
    run = load(_write_stream(tmp_path / "g.jsonl", [STREAM_HEADER] + kept))
    assert run.rows_lost == 3 and run.data_loss
    assert [g["first_step_index"] for g in run.gaps] == [2, 6]
    assert "gap" not in run.report and run.report == STREAM_HEADER
    assert len(run.rows) == 5
    assert "! data loss: 3 step rows could not be written" in render(run)


def test_empty_stream_header_only(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"schema": "gpuacct.steps/1"}) + "\n")
    run = load(p)
    assert run.rows == [] and not run.has_summary
    assert run.verdict == {} and run.bound == "none"


def test_not_a_report(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(ReportError):
        load(p)
    q = tmp_path / "empty.json"
    q.write_text("")
    with pytest.raises(ReportError):
        load(q)


def test_load_directory_picks_report(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text("{}")
    rep = golden_report()
    (tmp_path / "gpuacct-1.json").write_text(
        json.dumps(make_report(make_rows(5), rep["summary"], rep["verdict"])))
    assert load(tmp_path).kind == "report"


def test_package_computes_no_verdict() -> None:
    """One verdict: the bands and the verdict code live in C++ only."""
    import gpuacct.results as results
    import gpuacct.summary as summary
    for mod in (results, summary):
        for name in ("BANDS", "COMPUTE_HIGH", "CATEGORY_WALL", "summarize_rows"):
            assert not hasattr(mod, name), f"{mod.__name__}.{name}"


def test_stream_of_a_killed_job_summarises_all_rows(tmp_path: Path, monkeypatch) -> None:
    """A job killed with SIGKILL writes no closing line: its latest summary line covers fewer
    rows than the stream holds.  load() says how many; summarize_all=True asks the C++ tool for
    the summary of all of them (never one of Python's own)."""
    rep = golden_report()
    rows = rep["steps"]
    early = summary_line(rep, 10, provisional=True)
    early["verdict"] = dict(rep["verdict"], headline="as of 10 rows")
    lines = [STREAM_HEADER] + rows[:10] + [early] + rows[10:]
    path = _write_stream(tmp_path / "killed.steps.jsonl", lines)
    run = load(path)
    assert run.provisional and run.summary_rows == 10 and run.rows_behind == len(rows) - 10
    assert f"{len(rows) - 10} later step rows are not in it" in render(run)
    cli = build_dir() / "bin" / "gpuacct"
    assert cli.is_file(), f"{cli}: build the gpuacct tool first"
    monkeypatch.setenv("GPUACCT_CLI", str(cli))
    run = load(path, summarize_all=True)
    assert run.summary_source == "gpuacct analyze"
    assert run.summary_rows == len(rows) and run.rows_behind == 0
    assert run.summary["steps"] == rep["summary"]["steps"]
    assert run.verdict["bound"] == rep["verdict"]["bound"]
    assert run.verdict["headline"] != "as of 10 rows"
    assert f"summary of all {len(rows)} step rows, by gpuacct analyze" in render(run)
    # Without the tool: the latest summary line, as before.
    import gpuacct.launcher
    monkeypatch.setattr(gpuacct.launcher, "find_cli", lambda library: None)
    run = load(path, summarize_all=True)
    assert run.summary_source == "library" and run.summary_rows == 10
