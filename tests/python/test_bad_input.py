"""Bad input to the Python commands: one line and a non-zero exit, never a traceback, a blank
picture, an empty "stream" or a broken-pipe message (issue 30, item 3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

import gpuacct
from gpuacct.results import ReportError
from conftest import clean_env, check


def _py(args: List[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuacct", *args], env=clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=180,
                          **kw)


def _one_line(res: subprocess.CompletedProcess, rc: int, text: str) -> None:
    assert res.returncode == rc, (res.returncode, res.stderr)
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert text in res.stderr, res.stderr


@pytest.mark.parametrize("args, text", [
    (["--dpi", "0"], "argument --dpi: '0' is not a whole number > 0"),
    (["--dpi", "-5"], "argument --dpi: '-5' is not a whole number > 0"),
    (["--dpi", "1.5"], "argument --dpi: '1.5' is not a whole number"),
    (["--width", "0"], "argument --width: '0' is not a number > 0"),
    (["--height", "nan"], "argument --height: 'nan' is not a number"),
    (["--dpi", "100000"], "pixels; at most 20000 a side"),
])
def test_plot_size_out_of_range(report_file: Path, tmp_path: Path, args, text) -> None:
    out = tmp_path / "walls.png"
    res = _py(["plot", str(report_file), "-o", str(out), *args])
    _one_line(res, 2, text)
    assert not out.exists()


def test_plot_device_the_run_lacks(report_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "walls.png"
    res = _py(["plot", str(report_file), "-o", str(out), "--device", "7"])
    _one_line(res, 1, "no device 7 in this run (devices: 0")
    assert not out.exists()
    with pytest.raises(ValueError, match="dpi must be a number > 0"):
        gpuacct.plot_walls(str(report_file), str(out), dpi=0)


@pytest.mark.parametrize("data, match", [
    ({"a": 1}, "not a gpuacct report or step stream$"),
    ({"schema": "gpuacct.job/1", "ranks": []}, r"a job view, gpuacct.job/1: `gpuacct job`"),
    ({"traceEvents": []}, "a profiler trace: `gpuacct analyze`"),
    ({"schema": "something/1"}, "schema 'something/1', expected 'gpuacct.report/1'"),
])
def test_load_of_other_json_is_an_error(tmp_path: Path, data, match) -> None:
    p = tmp_path / "other.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ReportError, match=match):
        gpuacct.load(p)
    res = _py(["report", str(p)])
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr


def test_load_of_a_recording_is_an_error() -> None:
    sample = Path(__file__).resolve().parents[2] / "examples" / "data" / "sample.gpuacct"
    with pytest.raises(ReportError, match="not a gpuacct report or step stream"):
        gpuacct.load(sample)


def test_job_query_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    from job_export_fixture import make_job_export
    from gpuacct import job
    export = make_job_export(tmp_path / "export", ranks=64, hosts=8, steps=40)
    job.export_parquet(str(export.directory), str(tmp_path / "ds"))
    # `| head -1`: the reader goes away after one line, with most of the rows still to come.
    proc = subprocess.Popen([sys.executable, "-m", "gpuacct", "job-query", str(tmp_path / "ds"),
                             "slowest_ranks", "--format", "csv"], env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    rc = proc.wait(timeout=120)
    assert first.startswith(b"job,host,rank"), first
    assert err == "", err
    assert rc in (0, 141), rc  # 141: the rest was not written (128 + SIGPIPE), as a C tool
    check(_py(["job-query", str(tmp_path / "ds"), "slowest_ranks"]))  # unpiped: whole


def test_steps_columns_without_pandas_say_what_is_missing(report_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    run = gpuacct.load(report_file)
    assert run.steps[0]["step_index"] == 0 and len(run.steps[1:3]) == 2  # still a list
    with pytest.raises(TypeError, match=r"pandas is not installed.*pip install pandas"):
        run.steps[["step_index", "step_ms"]]  # the quick start's selection
