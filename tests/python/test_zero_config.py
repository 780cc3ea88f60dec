"""Issue 27 on the simulated device: the README's one-liner as typed.

`CUDA_INJECTION64_PATH=libgpuacct.so python train.py` with nothing else set -- no pip install,
no PYTHONPATH, started from another directory -- must instrument a PyTorch loop exactly as it
is with the package importable (the library carries the package: inject/python/python_hook.h).  The
loop has what the H200 showed first steps get wrong: parameter copies before it, a first
iteration that spends seconds on one-time set-up, and a data-bound steady state.  Without any
Python marks (GPUACCT_PYTHON=0) the steps are detected: one per iteration, ending after the
optimizer's kernels, and the data wait is inferred."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO, build_dir, clean_env

ITERS = 10
COPIES = 40           # parameters copied in before the loop (model.to("cuda"))
FIRST_SETUP_S = 1.2   # one-time set-up inside the first iteration (context, cuBLAS, autotune)
SAMPLE_SLEEP_S = 0.02  # per sample; a batch is 2 samples
KERNEL_MS = 6.0

LOOP = r"""
import ctypes, sys, time, torch
from torch.utils.data import DataLoader, Dataset
sim_lib, iters, copies, first_s, sleep_s, kernel_ms = (sys.argv[1], int(sys.argv[2]),
    int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
sim = ctypes.CDLL(sim_lib)
sim.simStreamCreate.restype = ctypes.c_void_p
sim.simStreamCreate.argtypes = [ctypes.c_int]
sim.simLaunchKernel.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64]
sim.simStreamSynchronize.argtypes = [ctypes.c_void_p]
sim.simMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int]
assert sim.simInit(1) == 0            # cuInit: the driver loads CUDA_INJECTION64_PATH
stream = sim.simStreamCreate(0)
for _ in range(copies):               # model.to("cuda"): a copy and a sync per parameter
    sim.simMemcpyAsync(stream, 1, 1 << 20, 30000, 0)
    sim.simStreamSynchronize(stream)

class Slow(Dataset):
    def __len__(self): return iters * 2
    def __getitem__(self, i):
        time.sleep(sleep_s)
        return torch.randn(16), torch.randn(1)

first = [True]
class SimModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 1)
    def forward(self, x):
        sim.simMemcpyAsync(stream, 1, x.numel() * 4, 20000, 0)   # the batch, host to device
        if first[0]:
            time.sleep(first_s)                                   # one-time set-up
            first[0] = False
        for name in (b"sim_gemm_fwd", b"sim_relu_fwd", b"sim_gemm_bwd", b"sim_relu_bwd"):
            sim.simLaunchKernel(stream, name, int(kernel_ms * 1e6 / 4))
        sim.simStreamSynchronize(stream)                          # loss.item()
        return self.lin(x)

class SimSGD(torch.optim.SGD):
    # The optimizer's kernels, named as PyTorch's foreach optimizers name theirs.
    def step(self, closure=None):
        for _ in range(3):
            sim.simLaunchKernel(stream, b"multi_tensor_apply_kernel_sgd", 20000)
        return super().step(closure)

model = SimModel()
opt = SimSGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=2):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
sim.simStreamSynchronize(stream)
print("gpuacct" in sys.modules, "gpuacct._auto" in sys.modules)
"""


def _run(tmp_path: Path, name: str, *, importable: bool, **env: str) -> Dict:
    lib = build_dir() / "inject" / "libgpuacct.so"
    sim_dir = build_dir() / "sim" / "lib"
    sim_cuda = sim_dir / "libcuda.so.1"
    for p in (lib, sim_cuda):
        if not p.is_file():
            pytest.fail(f"{p} is not built (cmake --build {build_dir()})")
    work = tmp_path / name
    work.mkdir()
    script = work / "train.py"
    script.write_text(LOOP)
    out = work / "out"
    e = clean_env(CUDA_INJECTION64_PATH=str(lib), GPUACCT_SIM_CLOCK="hybrid",
                  LD_PRELOAD=str(sim_cuda), GPUACCT_OUTPUT_DIR=str(out),
                  LD_LIBRARY_PATH=str(sim_dir), **env)
    if not importable:
        del e["PYTHONPATH"]  # the one-liner as typed: nothing of gpuacct on the path
    res = subprocess.run([sys.executable, str(script), str(sim_cuda), str(ITERS), str(COPIES),
                          str(FIRST_SETUP_S), str(SAMPLE_SLEEP_S), str(KERNEL_MS)], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=300, cwd=work)  # started from a directory of its own
    assert res.returncode == 0, res.stderr
    reports = sorted(out.glob("*.json"))
    assert len(reports) == 1, (os.listdir(out), res.stderr)
    rep = json.loads(reports[0].read_text())
    rep["_stdout"] = res.stdout
    rep["_stderr"] = res.stderr
    return rep


def _steps(rep: Dict) -> List[Dict]:
    return sorted(rep["steps"], key=lambda r: r["step_index"])


@pytest.mark.requires_torch
def test_one_liner_as_typed_is_instrumented_like_an_installed_package(tmp_path: Path) -> None:
    with_pkg = _run(tmp_path, "installed", importable=True)
    bare = _run(tmp_path, "bare", importable=False)
    assert with_pkg["collection"]["python"].startswith("installed: ")
    assert bare["collection"]["python"].startswith("embedded: "), bare["collection"]["python"]
    assert "optimizer steps" in bare["collection"]["python"]
    assert "DataLoader waits" in bare["collection"]["python"]
    assert bare["_stdout"].split() == ["True", "True"]
    for rep in (with_pkg, bare):
        steps = _steps(rep)
        # One step per optimizer step (the first begins at the first one: the first iteration
        # is set-up; the one left open after the last is dropped); no parameter copy became a
        # step.
        assert len(steps) == ITERS - 1, [s["step_index"] for s in steps]
        assert "step_detection" not in rep
        assert rep["collection"]["step_source"] == "capi"
        setup = rep["setup"]
        assert setup["copies"] >= COPIES and setup["syncs"] >= COPIES, setup
        assert setup["end_ns"] == steps[0]["host_begin_ns"]
        assert rep["verdict"]["bound"] == "data", rep["verdict"]
        # The first iteration's seconds of one-time work are set-up, in no step.
        assert setup["duration_ns"] / 1e9 >= FIRST_SETUP_S
        assert max(s["duration_ns"] for s in steps) / 1e9 < FIRST_SETUP_S
    # The same steps, whether or not the package was importable: same count, same lengths.
    a, b = _steps(with_pkg), _steps(bare)
    for x, y in zip(a[1:], b[1:]):
        assert abs(x["duration_ns"] - y["duration_ns"]) / 1e6 < 25, (x, y)


@pytest.mark.requires_torch
def test_no_marks_steps_are_the_iterations(tmp_path: Path) -> None:
    rep = _run(tmp_path, "nomarks", importable=False, GPUACCT_PYTHON="0")
    assert rep["collection"]["python"].startswith("off"), rep["collection"]["python"]
    sd = rep["step_detection"]
    assert sd["locked"] and sd["step_end_rule"] == "optimizer", sd
    steps = _steps(rep)
    # Every iteration is a step, as with marks (the first, with its one-time work, may be one
    # too: detection cannot tell it from the others); no parameter copy became one.
    assert ITERS - 1 <= len(steps) <= ITERS, [s["duration_ns"] for s in steps]
    assert rep["setup"]["copies"] >= COPIES
    # No data range was marked: the pause before each batch's input copy is inferred data wait.
    assert rep["verdict"]["bound"] == "data", rep["verdict"]
    stats = {s["name"]: s["value"] for s in rep["stats"]}
    assert stats.get("data_waits_inferred", 0) >= len(steps) - 2
