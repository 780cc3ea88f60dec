"""gpuacct.rank_files: the names of a rank's files, from the one table C++ compiles in
(analysis/job/rank_files.json; analysis/job/rank_files_test.cc checks the same names on the C++
side), and gpuacct.load of a rank's folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuacct.rank_files import kinds_in, rank_file, rank_file_name
from gpuacct.results import find_reports, load
from conftest import REPO, STREAM_HEADER, golden_report, make_report, make_rows

# name -> (kind, base, alone, by_content, tool_output): the cases rank_files_test.cc asserts.
CASES = {
    "gpuacct_h_12_rank3.report.json": ("report", "gpuacct_h_12_rank3", False, False, False),
    "gpuacct_h_12_rank3.json": ("trace", "gpuacct_h_12_rank3", False, True, False),
    "run.steps.jsonl": ("step_stream", "run", False, False, False),
    "other.jsonl": ("step_stream", "other", False, True, False),
    "run.collectives.csv": ("collectives", "run", False, False, False),
    "run.gpuacct": ("recording", "run", False, False, False),
    "run.gpuacct.tmp.4242": ("recording", "run", False, False, False),
    "run.gpuacct.tmp.x1": ("other", "run.gpuacct.tmp.x1", False, False, False),
    "x.pt.trace.json.gz": ("trace", "x", False, False, False),
    "x.json.gz": ("trace", "x", False, False, False),
    "report.json": ("report", "", True, False, False),
    "steps.jsonl": ("step_stream", "", True, False, False),
    "collectives.csv": ("collectives", "", True, False, False),
    "xreport.json": ("trace", "xreport", False, True, False),
    "job.json": ("other", "job.json", False, False, True),
    "a.timeline.json": ("other", "a.timeline.json", False, False, True),
    "a.steps.csv": ("other", "a.steps.csv", False, False, True),
    "notes.txt": ("other", "notes.txt", False, False, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_names(name: str) -> None:
    assert tuple(rank_file_name(name)) == CASES[name]


def test_written_names() -> None:
    assert rank_file("out/r", "report") == "out/r.report.json"
    assert rank_file("out/r", "step_stream") == "out/r.steps.jsonl"
    assert rank_file("out/r", "collectives") == "out/r.collectives.csv"
    assert rank_file("out/r", "recording") == "out/r.gpuacct"
    assert rank_file("out/r", "trace") is None


def test_the_table_is_the_one_cxx_compiles_in() -> None:
    here = Path(__file__).resolve()
    import gpuacct.rank_files as rf
    assert Path(rf._TABLE_FILE).read_text() == (REPO / "analysis" / "job" /
                                                  "rank_files.json").read_text(), here


def test_a_rank_folder_loads_its_report_in_either_name(tmp_path: Path) -> None:
    rep = golden_report()
    text = json.dumps(make_report(make_rows(5), rep["summary"], rep["verdict"]))
    new = tmp_path / "new"
    new.mkdir()
    (new / "gpuacct_h_1_rank0.report.json").write_text(text)
    (new / "job.json").write_text(json.dumps({"schema": "gpuacct.job/1"}))
    old = tmp_path / "old"
    old.mkdir()
    (old / "gpuacct_h_1_rank0.json").write_text(text)
    (old / "gpuacct_h_1_rank0.timeline.json").write_text(text)  # a tool's output: left out
    for d in (new, old):
        assert len(find_reports(str(d))) == 1
        assert load(d).kind == "report"
    assert kinds_in(str(old)) == {"by_content": [str(old / "gpuacct_h_1_rank0.json")]}


def test_a_killed_ranks_folder_loads_its_step_stream(tmp_path: Path) -> None:
    rows = golden_report()["steps"][:6]
    (tmp_path / "gpuacct_h_1_rank0.steps.jsonl").write_text(
        "\n".join(json.dumps(x) for x in [STREAM_HEADER] + rows) + "\n")
    run = load(tmp_path)
    assert run.kind == "stream" and len(run.rows) == 6
