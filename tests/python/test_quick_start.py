"""The README's CPU quick start ("Try it without a GPU", also docs/python.md), command by command,
as a user runs it: pip's gpuacct and the C++ tool on PATH, examples/train.py on the CPU under
`gpuacct run`, the step rows read while it runs, the Prometheus file, the report, the plot."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import SHIM, build_dir, check, venv_env

TRAIN = SHIM.parent / "examples" / "train.py"
STEPS = 150


@pytest.mark.requires_torch
def test_cpu_quick_start(venv: Path, real_lib: str, tmp_path: Path) -> None:
    env = venv_env(PATH=os.pathsep.join([str(build_dir() / "bin"), str(venv / "bin"),
                                         "/usr/bin", "/bin"]))
    (tmp_path / "prom").mkdir()

    def sh(*args: str) -> subprocess.CompletedProcess:
        return check(subprocess.run(list(args), env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, timeout=120))

    run_env = dict(env, GPUACCT_PROM_DIR="prom", GPUACCT_PROM_PERIOD_MS="1000")
    job = subprocess.Popen(["gpuacct", "run", "--output", "runs", "--", "python", str(TRAIN),
                            "--device", "cpu", "--steps", str(STEPS)],
                           env=run_env, cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        # While it runs: the step stream grows, a provisional summary, the metrics file.
        live_rows = 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and job.poll() is None:
            streams = glob.glob(str(tmp_path / "runs" / "*.steps.jsonl"))
            proms = glob.glob(str(tmp_path / "prom" / "*.prom"))
            if streams and proms:
                report = subprocess.run(["gpuacct-py", "report", streams[0]], env=env,
                                        stdout=subprocess.PIPE, text=True, timeout=60)
                metrics = Path(proms[0]).read_text()
                if "[in progress: provisional]" in report.stdout and "gpuacct_steps_total{" in \
                        metrics and job.poll() is None:
                    rows = sh("python", "-c", "import glob, gpuacct; run = gpuacct.load("
                              "glob.glob('runs/*.steps.jsonl')[0]); print(len(run.steps)); "
                              "print(run.steps[['step_index', 'step_ms', 'data_ms']].tail(3))")
                    live_rows = int(rows.stdout.split()[0])
                    assert "step_ms" in rows.stdout
                    break
            time.sleep(0.5)
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, err
    assert 0 < live_rows < STEPS, f"no step rows read while the job ran ({live_rows})"
    assert f"data: {STEPS} steps on cpu" in out
    assert "on the host only (no GPU activity)" in err  # the launcher's summary
    reports = glob.glob(str(tmp_path / "runs" / "*.json"))
    assert len(reports) == 1, reports
    rep = json.loads(Path(reports[0]).read_text())
    assert rep["verdict"]["reason"] == "no_gpu_activity"
    assert rep["summary"]["walls"]["data"]["share"] > 0.8  # the loader sleeps 30 ms a batch
    metrics = Path(glob.glob(str(tmp_path / "prom" / "*.prom"))[0]).read_text()
    # gpuacct_steps_total: every step -- one per optimizer step after the first (what comes
    # before the first optimizer step is set-up, docs/accounting.md §1)
    assert f'device="-1"}} {STEPS - 1}' in metrics
    assert sh("gpuacct", "plot", reports[0], "-o", "walls.png").stdout.strip() == "walls.png"
    assert (tmp_path / "walls.png").stat().st_size > 1000
