"""Shared fixtures for the gpuacct Python tests.

Run from ctest (tests/python/CMakeLists.txt) or by hand:

    PYTHONPATH=python_shim GPUACCT_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python

Tests that need the built library fail (never skip) without GPUACCT_BUILD_DIR / the library.
Tests that need torch are marked ``requires_torch`` and skip only when torch is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SHIM = REPO / "python_shim"

if str(SHIM) not in sys.path:
    sys.path.insert(0, str(SHIM))

WALLS = ("compute", "communication", "data", "launch", "other")


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


HAVE_TORCH = _have_torch()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "requires_torch: needs PyTorch (CI installs it)")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="PyTorch is not installed for " + sys.executable)
    for item in items:
        if "requires_torch" in item.keywords and not HAVE_TORCH:
            item.add_marker(skip)


# --- environment for child processes -------------------------------------------------------

def clean_env(**extra: str) -> Dict[str, str]:
    """os.environ without any gpuacct/injection variables, with PYTHONPATH=python_shim."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUACCT_") and k not in (
               "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "LD_PRELOAD",
               "FAKE_GPUACCT_LOG")}
    # A sanitizer runtime preloaded by `scripts/test.sh --sanitize=...` stays: the sanitized
    # library cannot work in a process that lacks it (it must be the first library loaded).
    sanitizers = [p for p in os.environ.get("LD_PRELOAD", "").replace(":", " ").split()
                  if os.path.basename(p).startswith(("libasan", "libtsan", "libubsan"))]
    if sanitizers:
        env["LD_PRELOAD"] = " ".join(sanitizers)
    env["PYTHONPATH"] = str(SHIM)
    env.update(extra)
    return env


def run_py(code: str, env: Dict[str, str], timeout: float = 180,
           args: Sequence[str] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout)


def check(res: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert res.returncode == 0, f"rc={res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res


# --- the fake library (logs calls) ---------------------------------------------------------

@pytest.fixture(scope="session")
def fake_lib(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A stand-in libgpuacct.so built from fake_gpuacct.c (logs every API call)."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.fail("no C compiler (cc/gcc) to build the fake libgpuacct.so test library")
    out = tmp_path_factory.mktemp("fakelib") / "libgpuacct.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(HERE / "fake_gpuacct.c"),
                    "-lpthread"], check=True)
    return str(out)


def read_fake_log(path: str) -> List[tuple]:
    """[(t_ns, call, arg)] from a FAKE_GPUACCT_LOG file."""
    out = []
    for line in Path(path).read_text().splitlines():
        t, call, arg = line.split(" ", 2)
        out.append((int(t), call, arg))
    return out


# --- the built library ---------------------------------------------------------------------

def build_dir() -> Path:
    """The CMake build directory (GPUACCT_BUILD_DIR); fails the test when absent."""
    d = os.environ.get("GPUACCT_BUILD_DIR", "").strip()
    if not d:
        pytest.fail("GPUACCT_BUILD_DIR is not set: integration tests need the built library. "
                    "Run them through ctest, or set GPUACCT_BUILD_DIR=<cmake build dir> after "
                    "`cmake --build <dir> --target gpuacct`.")
    p = Path(d).resolve()
    if not p.is_dir():
        pytest.fail(f"GPUACCT_BUILD_DIR={d} is not a directory")
    return p


@pytest.fixture
def real_lib() -> str:
    lib = build_dir() / "inject" / "libgpuacct.so"
    if not lib.is_file():
        pytest.fail(f"{lib} does not exist: build it first (cmake --build "
                    f"{build_dir()} --target gpuacct)")
    return str(lib)


# --- reports and streams -------------------------------------------------------------------
# The Python package never computes a summary or verdict: it shows the library's.  So the
# fixtures' summaries come from the C++ code: tests/golden/sample.report.json is a report the
# C++ code wrote (`gpuacct synth --preset demo`, analysed): 24 step rows, 2 of them warm-up,
# data-bound.

GOLDEN_REPORT = REPO / "tests" / "golden" / "sample.report.json"
STREAM_HEADER = {"schema": "gpuacct.steps/1", "source": "injected", "hostname": "testhost",
                 "pid": 4321, "rank": 0}  # the library's first line (inject/pipeline/pipeline.cc)


def golden_report() -> Dict[str, object]:
    return json.loads(GOLDEN_REPORT.read_text())


def summary_line(report: Dict[str, object], step_rows: int, provisional: bool) -> Dict[str, object]:
    """A stream's summary line as the library writes it (inject/output/step_stream.h) for
    `report`."""
    return {"summary": report["summary"], "verdict": report["verdict"],
            "provisional": provisional, "step_rows": step_rows,
            "data_loss": report.get("data_loss", False),
            "stats": [{"name": s["name"], "value": s["value"], "severity": s["severity"]}
                      for s in report.get("stats", []) if s["value"]]}


def make_row(step_index: int, walls_ms: Dict[str, float], *, device: int = 0,
             warmup: bool = False, begin_ns: int = 0) -> Dict[str, object]:
    """One step row as step_row_to_json writes it.  Walls are split into categories."""
    ns = {w: int(round(walls_ms.get(w, 0.0) * 1e6)) for w in WALLS}
    cats = {
        "compute": ns["compute"],
        "comm_exposed": ns["communication"],
        "copy_input": ns["data"] // 4,
        "copy_other": ns["other"] // 3,
        "data_wait": ns["data"] - ns["data"] // 4,
        "launch_gap": ns["launch"],
        "host_other": ns["other"] - ns["other"] // 3,
    }
    dur = sum(ns.values())
    return {
        "step_index": step_index,
        "step_number": step_index,
        "device": device,
        "host_only": False,
        "warmup": warmup,
        "host_begin_ns": begin_ns,
        "host_end_ns": begin_ns + dur,
        "window_begin_ns": begin_ns,
        "window_end_ns": begin_ns + dur,
        "duration_ns": dur,
        "categories": cats,
        "walls": ns,
        "comm_total_ns": ns["communication"],
        "comm_overlapped_ns": 0,
        "gpu_busy_ns": ns["compute"] + ns["communication"] + cats["copy_input"]
        + cats["copy_other"],
        "kernels": 10,
        "copies": 2,
        "launches": 12,
        "flops": 0.0,
    }


def make_rows(n: int, warmup: int = 2, devices: int = 1,
              walls_ms: Optional[Dict[str, float]] = None) -> List[Dict[str, object]]:
    base = walls_ms or {"compute": 10.0, "communication": 1.0, "data": 6.0, "launch": 0.5,
                        "other": 2.5}
    rows = []
    t = 1_000_000
    for i in range(n):
        w = dict(base)
        w["data"] = base.get("data", 0.0) * (1.0 + 0.5 * (i % 3))  # some variation per step
        for d in range(devices):
            rows.append(make_row(i, w, device=d, warmup=i < warmup, begin_ns=t))
        t += int(sum(w.values()) * 1e6)
    return rows


def make_report(rows: Iterable[Dict[str, object]], summary: Dict[str, object],
                verdict: Dict[str, object]) -> Dict[str, object]:
    """A whole report laid out as analysis/report/report.cc writes it, with the summary and
    verdict given (as data: a test that needs one that fits its rows uses golden_report())."""
    return {
        "schema": "gpuacct.report/1",
        "generated_by": "gpuacct 0.1.0",
        "run": {"source": "synthetic", "source_path": "", "hostname": "testhost", "pid": 1234,
                "rank": -1, "world_size": 0, "command": "train.py", "devices": []},
        "config": {"launch_latency_threshold_ns": 30000, "host_pause_threshold_ns": 100000,
                   "warmup_steps": 2, "pending_launch_timeout_ns": 2000000000},
        "summary": summary,
        "verdict": verdict,
        "top_kernels": [],
        "largest_idle_gaps": [],
        "stats": [],
        "data_loss": False,
        "steps": list(rows),
    }


@pytest.fixture
def report_file(tmp_path: Path) -> Path:
    p = tmp_path / "gpuacct-report.json"
    shutil.copyfile(GOLDEN_REPORT, p)
    return p


@pytest.fixture
def stream_file(tmp_path: Path) -> Path:
    """The JSONL step stream of a run in progress: the header, the golden report's rows, the
    provisional summary line the library wrote after them, and a next row cut in the middle."""
    rep = golden_report()
    rows = rep["steps"]
    p = tmp_path / "gpuacct-steps.jsonl"
    lines = [json.dumps(STREAM_HEADER)] + [json.dumps(r) for r in rows]
    lines.append(json.dumps(summary_line(rep, len(rows), provisional=True)))
    p.write_text("\n".join(lines) + "\n" + json.dumps(make_row(len(rows), {"compute": 1.0}))[:57])
    return p


# --- an installed copy: venv + pip install (the .pth and console script as users get them) --

@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv (system site-packages: torch, pandas...) with gpuacct pip-installed from a copy
    of python_shim/.  Returns the venv directory; bin/python and bin/gpuacct-py are in it."""
    root = tmp_path_factory.mktemp("venv")
    src = root / "src"
    shutil.copytree(SHIM, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                             "__pycache__"))
    env = clean_env(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    v = root / "v"
    check(subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                          str(v)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300))
    check(subprocess.run([str(v / "bin" / "python"), "-m", "pip", "install", "-q",
                          "--no-build-isolation", "--no-deps", "--no-cache-dir", str(src)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=300, cwd=root))
    assert (v / "bin" / "gpuacct-py").is_file()
    return v


def venv_env(**extra: str) -> Dict[str, str]:
    env = clean_env(**extra)
    env.pop("PYTHONPATH", None)  # only the installed copy
    return env


# A training loop without any gpuacct code.  argv: batches, sleep per sample (s), workers
PLAIN_LOOP = r"""
import sys, time, torch
from torch.utils.data import DataLoader, Dataset
batches, sleep_s, workers = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
class Slow(Dataset):
    def __len__(self): return batches * 2
    def __getitem__(self, i):
        time.sleep(sleep_s)
        return torch.randn(16), torch.randn(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in DataLoader(Slow(), batch_size=2, num_workers=workers):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
print("loop done")
"""
