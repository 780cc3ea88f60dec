"""Integration with the built library (GPUACCT_BUILD_DIR): real torch loops, CPU only and on
the simulated device.  These tests fail -- never skip -- when the build is missing; they skip
only when torch itself is not installed."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import gpuacct
from conftest import (PLAIN_LOOP, build_dir, check, clean_env, golden_report, make_report,
                      make_rows, venv_env)

BATCHES = 8
SAMPLE_SLEEP_S = 0.02  # planted in Dataset.__getitem__; a batch is 2 samples -> 40 ms
BATCH_WAIT_S = 2 * SAMPLE_SLEEP_S
WARMUP = 1


def _outputs(out: Path) -> Tuple[List[str], List[str]]:
    reports = sorted(glob.glob(str(out / "*.json")))
    streams = sorted(glob.glob(str(out / "*.jsonl")))
    return reports, streams


def _one_report(out: Path, res: subprocess.CompletedProcess):
    reports, streams = _outputs(out)
    assert len(reports) == 1, (f"expected one report in {out}, found {os.listdir(out)}\n"
                               f"stdout:\n{res.stdout}\nstderr:\n{res.stderr}")
    return gpuacct.load(reports[0]), streams


def _check_steps(run, *, host_only: bool) -> List[Dict]:
    rows = sorted(run.rows, key=lambda r: (r["step_index"], r["device"]))
    # The first step begins at the first optimizer step (the first iteration is set-up), each
    # optimizer step ends one and begins the next: BATCHES - 1 steps; the one left open by the
    # last optimizer step is dropped at exit.
    assert len(rows) == BATCHES - 1, [r["step_index"] for r in rows]
    assert [r["step_index"] for r in rows] == list(range(len(rows)))
    for r in rows:
        assert r["warmup"] == (r["step_index"] < WARMUP)
        if host_only:
            assert r["host_only"] is True and r["device"] == -1
    return rows


def test_cli_reads_python_fixture(tmp_path: Path) -> None:
    """The synthetic reports the Python tests use are laid out as the C++ CLI expects."""
    cli = build_dir() / "bin" / "gpuacct"
    if not cli.is_file():
        pytest.fail(f"{cli} does not exist: build it (cmake --build {build_dir()} "
                    "--target gpuacct_cli)")
    rep = golden_report()
    p = tmp_path / "r.json"
    p.write_text(json.dumps(make_report(make_rows(12), rep["summary"], rep["verdict"])))
    res = check(subprocess.run([str(cli), "report", str(p)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60))
    assert "22 steps" in res.stdout and "data-bound" in res.stdout


@pytest.mark.requires_torch
def test_cpu_loop_records_steps_and_data_waits(venv: Path, real_lib: str,
                                               tmp_path: Path) -> None:
    """No GPU: the library records host ranges; the planted sleep in __getitem__ shows up as
    data wait of that length in every step, and the report says there was no GPU activity."""
    script = tmp_path / "train.py"
    script.write_text(PLAIN_LOOP)
    out = tmp_path / "out"
    res = subprocess.run([str(venv / "bin" / "gpuacct-py"), "run", "--library", real_lib,
                          "--output", str(out), "--warmup", str(WARMUP), "--",
                          str(venv / "bin" / "python"), str(script), str(BATCHES),
                          str(SAMPLE_SLEEP_S), "0"],
                         env=venv_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300, cwd=tmp_path)
    check(res)
    assert "loop done" in res.stdout
    run, streams = _one_report(out, res)
    rows = _check_steps(run, host_only=True)
    for r in rows[1:]:  # step 0 is warm-up (WARMUP): the loop's first steps are noisier
        dw = r["categories.data_wait"] / 1e9
        dur = r["duration_ns"] / 1e9
        # >= the planted sleep; the loaded 2-core box adds scheduling noise on top.
        assert BATCH_WAIT_S * 0.95 <= dw <= BATCH_WAIT_S + 0.25, (r["step_index"], dw)
        assert dw <= dur
        assert r["data_ms"] >= r["categories.data_wait"] / 1e6 - 1e-6
    assert run.verdict["bound"] == "none"
    assert "No GPU activity" in run.verdict["headline"]
    # The summary is printed after the program's output.
    assert "No GPU activity" in res.stderr
    # The JSONL stream of the same run loads as a stream with the same rows.
    assert streams, os.listdir(out)
    s = gpuacct.load(streams[0])
    assert s.kind == "stream" and len(s.rows) == len(run.rows)


@pytest.mark.requires_torch
def test_ld_preload_installed_package(venv: Path, real_lib: str, tmp_path: Path) -> None:
    """LD_PRELOAD alone: the library's load constructor points CUDA_INJECTION64_PATH at itself,
    so the installed gpuacct_auto.pth imports gpuacct._auto, which attaches to the preloaded
    instance (RTLD_NOLOAD): a plain loop with a 2-worker DataLoader gets steps and data waits."""
    script = tmp_path / "train.py"
    script.write_text(PLAIN_LOOP + "\nimport gpuacct._lib as l; print('binding', l.api.how)\n")
    out = tmp_path / "out"
    out.mkdir()
    env = venv_env(LD_PRELOAD=real_lib, GPUACCT_OUTPUT_DIR=str(out),
                   GPUACCT_WARMUP_STEPS=str(WARMUP), GPUACCT_QUIET="1")
    res = subprocess.run([str(venv / "bin" / "python"), str(script), str(BATCHES),
                          str(SAMPLE_SLEEP_S), "2"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path)
    check(res)
    assert "binding attached" in res.stdout
    run, _ = _one_report(out, res)
    rows = _check_steps(run, host_only=True)
    # Two workers prefetch, so steps wait less than the serial 40 ms (the first batch, which
    # waits for the workers to start, is set-up: before the first optimizer step).
    assert sum(r["categories.data_wait"] for r in rows) / 1e9 > BATCH_WAIT_S


SIM_LOOP = r"""
import ctypes, sys, time, torch
from torch.utils.data import DataLoader, Dataset
sim_lib, batches, sleep_s, kernel_ms = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
sim = ctypes.CDLL(sim_lib)
sim.simStreamCreate.restype = ctypes.c_void_p
sim.simStreamCreate.argtypes = [ctypes.c_int]
sim.simLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64]
sim.simStreamSynchronize.argtypes = [ctypes.c_void_p]
sim.simMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int]
sim.simKernelsLaunched.restype = ctypes.c_uint64
assert sim.simInit(1) == 0            # cuInit: the driver loads CUDA_INJECTION64_PATH
assert sim.simGetClockMode() == 1, "GPUACCT_SIM_CLOCK=hybrid expected"
stream = sim.simStreamCreate(0)

class Slow(Dataset):
    def __len__(self): return batches * 2
    def __getitem__(self, i):
        time.sleep(sleep_s)
        return torch.randn(16), torch.randn(1)

class SimModel(torch.nn.Module):
    # The "model" runs on the simulated GPU: an input copy, forward/backward kernels, a sync.
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)
    def forward(self, x):
        sim.simMemcpyAsync(stream, 1, x.numel() * 4, 20000, 0)
        for name in (b"sim_gemm_fwd", b"sim_relu_fwd", b"sim_gemm_bwd", b"sim_relu_bwd"):
            sim.simLaunchKernel(stream, name, int(kernel_ms * 1e6 / 4))
        sim.simStreamSynchronize(stream)
        return self.lin(x)

model = SimModel()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=2):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
sim.simDeviceSynchronize(-1)
print("kernels", sim.simKernelsLaunched())
"""


@pytest.mark.requires_torch
def test_sim_device_loop_is_data_bound(venv: Path, real_lib: str, tmp_path: Path) -> None:
    sim_dir = build_dir() / "sim" / "lib"
    sim_cuda = sim_dir / "libcuda.so.1"
    if not sim_cuda.is_file() or not (sim_dir / "libcupti.so.13").is_file():
        pytest.fail(f"simulated device not built in {sim_dir} (cmake --build {build_dir()} "
                    "--target sim_cuda sim_cupti)")
    script = tmp_path / "train_sim.py"
    script.write_text(SIM_LOOP)
    out = tmp_path / "out"
    # Preloaded, the sim's libcuda is the process's CLOCK_REALTIME (tests/sim/README.md): the
    # host records of the library and the simulated GPU share the hybrid clock.
    env = venv_env(GPUACCT_SIM_CLOCK="hybrid", LD_PRELOAD=str(sim_cuda),
                   LD_LIBRARY_PATH=os.pathsep.join(
                       [str(sim_dir)] + [p for p in os.environ.get("LD_LIBRARY_PATH", "")
                                         .split(os.pathsep) if p]))
    kernel_ms = 8.0
    res = subprocess.run([str(venv / "bin" / "gpuacct-py"), "run", "--library", real_lib,
                          "--output", str(out), "--warmup", str(WARMUP), "--",
                          str(venv / "bin" / "python"), str(script), str(sim_cuda),
                          str(BATCHES), str(SAMPLE_SLEEP_S), str(kernel_ms)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=300, cwd=tmp_path)
    check(res)
    assert f"kernels {BATCHES * 4}" in res.stdout
    run, _ = _one_report(out, res)
    rows = _check_steps(run, host_only=False)
    assert {r["device"] for r in rows} == {0}
    for r in rows[1:]:
        assert r["kernels"] == 4, r
        assert r["categories.compute"] / 1e6 == pytest.approx(kernel_ms, rel=0.05, abs=0.2)
        dw = r["categories.data_wait"] / 1e9
        assert BATCH_WAIT_S * 0.9 <= dw <= BATCH_WAIT_S + 0.25, (r["step_index"], dw)
    assert run.verdict["bound"] == "data", run.verdict
    shares = {w: run.summary["walls"][w]["share"] for w in
              ("compute", "communication", "data", "launch", "other")}
    assert max(shares, key=shares.get) == "data", shares
    assert "data-bound" in res.stderr  # the launcher's summary


@pytest.mark.requires_torch
def test_sim_library_imports_auto_itself(real_lib: str, tmp_path: Path) -> None:
    """No launcher, no .pth: the driver (sim libcuda) loads CUDA_INJECTION64_PATH at cuInit in
    the middle of the script, torch is already imported, and the library's Py_AddPendingCall
    imports gpuacct._auto, which patches the loaded torch: the loop is still fully accounted."""
    sim_dir = build_dir() / "sim" / "lib"
    sim_cuda = sim_dir / "libcuda.so.1"
    if not sim_cuda.is_file():
        pytest.fail(f"simulated device not built in {sim_dir}")
    script = tmp_path / "train_sim.py"
    script.write_text(SIM_LOOP + "\nimport sys; print('auto', 'gpuacct._auto' in sys.modules)\n")
    out = tmp_path / "out"
    out.mkdir()
    env = clean_env(CUDA_INJECTION64_PATH=real_lib, GPUACCT_SIM_CLOCK="hybrid",
                    LD_PRELOAD=str(sim_cuda),
                    GPUACCT_OUTPUT_DIR=str(out), GPUACCT_WARMUP_STEPS=str(WARMUP),
                    LD_LIBRARY_PATH=str(sim_dir))
    res = subprocess.run([sys.executable, str(script), str(sim_cuda), str(BATCHES),
                          str(SAMPLE_SLEEP_S), "8"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path)
    check(res)
    assert "auto True" in res.stdout
    run, _ = _one_report(out, res)
    rows = _check_steps(run, host_only=False)
    assert all(r["kernels"] == 4 for r in rows[1:])
    assert run.verdict["bound"] == "data", run.verdict


@pytest.mark.requires_torch
def test_sim_stream_shows_the_libraries_summary(real_lib: str, tmp_path: Path) -> None:
    """One verdict: on a simulated-device run, every summary line of the stream (provisional
    ones while the loop runs, the final one at exit) is the C++ summary of the rows before it
    (stream_summary_check recomputes each with the library's own functions), the final one is
    the report's, and gpuacct.load shows exactly the line it read -- of the whole stream and of
    the stream cut right after each provisional line."""
    sim_dir = build_dir() / "sim" / "lib"
    sim_cuda = sim_dir / "libcuda.so.1"
    checker = build_dir() / "tests" / "e2e" / "stream_summary_check"
    for p in (sim_cuda, checker):
        if not p.is_file():
            pytest.fail(f"{p} is not built (cmake --build {build_dir()})")
    script = tmp_path / "train_sim.py"
    script.write_text(SIM_LOOP)
    out = tmp_path / "out"
    out.mkdir()
    # A short flush period finalises rows while the loop runs (the watermark trails by five
    # flushes); ~1.5 s of steps give the library time for provisional summary lines.
    env = clean_env(CUDA_INJECTION64_PATH=real_lib, GPUACCT_SIM_CLOCK="hybrid",
                    LD_PRELOAD=str(sim_cuda), GPUACCT_OUTPUT_DIR=str(out),
                    GPUACCT_WARMUP_STEPS=str(WARMUP), GPUACCT_FLUSH_MS="20",
                    GPUACCT_QUIET="1", LD_LIBRARY_PATH=str(sim_dir))
    batches = 50
    res = subprocess.run([sys.executable, str(script), str(sim_cuda), str(batches), "0.01",
                          "8"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300, cwd=tmp_path)
    check(res)
    run, streams = _one_report(out, res)
    assert len(streams) == 1
    stream = Path(streams[0])
    lines = [json.loads(l) for l in stream.read_text().splitlines()]
    summary_at = [i for i, l in enumerate(lines) if "summary" in l]
    provisional = [i for i in summary_at if lines[i]["provisional"]]
    assert provisional, "no provisional summary line while the loop ran"
    assert summary_at[-1] == len(lines) - 1 and lines[-1]["provisional"] is False

    # C++ == C++: each line is the summary of the rows before it.
    chk = check(subprocess.run([str(checker), str(stream)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, timeout=60))
    assert chk.stdout.startswith(f"{len(summary_at)} summary lines match"), chk.stdout

    # The final line is the report's; Python shows it.
    assert lines[-1]["summary"] == run.summary and lines[-1]["verdict"] == run.verdict
    whole = gpuacct.load(stream)
    assert not whole.provisional
    assert whole.summary == run.summary and whole.verdict == run.verdict
    assert whole.summary_rows == len(run.rows) == len(whole.rows)
    assert run.verdict["bound"] == "data"

    # Mid-run: the stream as a reader saw it right after a provisional line.
    for i in provisional:
        cut = tmp_path / f"cut{i}.steps.jsonl"
        cut.write_text("".join(json.dumps(l) + "\n" for l in lines[:i + 1]))
        mid = gpuacct.load(cut)
        rows_before = sum(1 for l in lines[:i] if "step_index" in l)
        assert mid.provisional and mid.has_summary
        assert mid.summary == lines[i]["summary"] and mid.verdict == lines[i]["verdict"]
        assert mid.summary_rows == rows_before == len(mid.rows) == lines[i]["step_rows"]
