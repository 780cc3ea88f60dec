"""gpuacct.load: final JSON reports and in-progress JSONL streams."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import gpuacct
from gpuacct.results import ReportError, load
from conftest import make_report, make_row, make_rows, WALLS


def test_load_json_report(report_file: Path) -> None:
    run = gpuacct.load(report_file)
    assert run.kind == "report"
    assert not run.provisional
    rows = run.rows
    assert len(rows) == 12
    assert [r["step_index"] for r in rows] == list(range(12))
    r = rows[3]
    # Flattened nested fields and convenience columns in ms.
    assert r["categories.data_wait"] + r["categories.copy_input"] == r["walls.data"]
    assert r["data_ms"] == pytest.approx(r["walls.data"] / 1e6)
    assert r["step_ms"] == pytest.approx(r["duration_ns"] / 1e6)
    assert sum(r[f"{w}_ms"] for w in WALLS) == pytest.approx(r["step_ms"])
    assert run.summary["steps"] == 10 and run.summary["warmup_steps"] == 2
    assert run.verdict["bound"] == "data"
    assert run.bound == "data"


def test_steps_is_dataframe_with_pandas(report_file: Path) -> None:
    pd = pytest.importorskip("pandas")  # pandas is optional; the list form is tested below
    run = load(report_file)
    assert isinstance(run.steps, pd.DataFrame)
    assert len(run.steps) == 12
    for col in ("step_index", "step_number", "device", "warmup", "window_begin_ns",
                "window_end_ns", "duration_ns", "gpu_busy_ns", "categories.compute", "walls.launch", "step_ms", "data_ms"):
        assert col in run.steps.columns, col
    # The usual analysis works without any conversion.
    steady = run.steps[~run.steps["warmup"]]
    assert len(steady) == 10
    assert steady["data_ms"].mean() > steady["launch_ms"].mean()


def test_steps_is_list_without_pandas(report_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    run = load(report_file)
    assert isinstance(run.steps, list)
    assert isinstance(run.steps[0], dict)
    assert run.steps[0]["step_index"] == 0


def test_load_stream_in_progress(stream_file: Path) -> None:
    run = load(stream_file)
    assert run.kind == "stream"
    assert run.provisional
    assert run.partial_lines == 1  # the cut last line is skipped, not an error
    assert run.report["schema"] == "gpuacct.steps/1" and run.report["pid"] == 4321
    assert len(run.rows) == 9
    assert run.summary["steps"] == 7 and run.summary["warmup_steps"] == 2
    assert run.verdict["bound"] == "data"
    assert run.verdict["severity"] == "high"
    shares = {w: run.summary["walls"][w]["share"] for w in WALLS}
    assert sum(shares.values()) == pytest.approx(1.0)


def test_stream_and_report_agree(tmp_path: Path) -> None:
    rows = make_rows(20, devices=2)
    rep = tmp_path / "r.json"
    rep.write_text(json.dumps(make_report(rows)))
    stream = tmp_path / "r.jsonl"
    stream.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, b = load(rep), load(stream)
    assert a.summary["steps"] == b.summary["steps"] == 18
    assert a.verdict["bound"] == b.verdict["bound"]
    assert a.summary["step_time_ms"]["p50"] == pytest.approx(b.summary["step_time_ms"]["p50"])


def test_stream_verdicts(tmp_path: Path) -> None:
    def verdict(walls, gpu_busy=None):
        rows = [make_row(i, walls, warmup=i < 2) for i in range(6)]
        for r in rows:
            if gpu_busy is not None:
                r["gpu_busy_ns"] = gpu_busy
        p = tmp_path / "v.jsonl"
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return load(p).verdict
    assert verdict({"compute": 10, "launch": 3})["bound"] == "launch"
    assert verdict({"compute": 10, "launch": 0.5})["severity"] == "moderate"
    assert verdict({"compute": 10, "communication": 4, "data": 0.1})["bound"] == "communication"
    assert verdict({"compute": 10, "other": 0.1})["bound"] == "compute"
    # The host (other wall) can be the verdict too, as in run_summary.cc.
    host = verdict({"compute": 37, "other": 63})
    assert host["bound"] == "other" and host["severity"] == "high"
    assert "host-bound" in host["headline"]
    assert verdict({"compute": 85, "other": 11, "launch": 4})["bound"] == "other"
    assert verdict({"compute": 95, "other": 5})["severity"] == "high"
    # Host-only timing (no GPU activity): no verdict.
    v = verdict({"other": 5}, gpu_busy=0)
    assert v["bound"] == "none" and "No GPU activity" in v["headline"]


def test_empty_stream_header_only(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"schema": "gpuacct.steps/1"}) + "\n")
    run = load(p)
    assert run.rows == [] and run.summary["steps"] == 0
    assert run.verdict["bound"] == "none"


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
    (tmp_path / "gpuacct-1.json").write_text(json.dumps(make_report(make_rows(5))))
    assert load(tmp_path).kind == "report"
