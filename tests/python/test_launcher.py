"""python -m gpuacct run / gpuacct-py: environment, exit status, summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest


from conftest import (PLAIN_LOOP, SHIM, check, clean_env, golden_report, make_report,
                      make_rows, read_fake_log)

# A child that records its environment and the gpuacct binding state, optionally writes a
# report into GPUACCT_OUTPUT_DIR and exits with the requested status.
CHILD = r"""
import json, os, sys
out = sys.argv[1]
import gpuacct
env = {k: v for k, v in os.environ.items() if k.startswith(("GPUACCT_", "CUDA_", "NVTX_"))}
env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
env["_loaded"] = gpuacct.is_loaded()
json.dump(env, open(out, "w"))
if len(sys.argv) > 3:
    open(os.path.join(os.environ["GPUACCT_OUTPUT_DIR"], "gpuacct_test_1_rank-1.json"),
         "w").write(sys.argv[3])
sys.exit(int(sys.argv[2]))
"""


def launch(args: List[str], env=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuacct", *args], env=env or clean_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


def test_run_sets_environment(fake_lib: str, tmp_path: Path) -> None:
    seen = tmp_path / "env.json"
    out = tmp_path / "reports"
    res = launch(["run", "--library", fake_lib, "--output", str(out), "--warmup", "3",
                  "--launch-latency-us", "45", "--host-pause-us", "250", "--record", "--",
                  sys.executable, "-c", CHILD, str(seen), "0"])
    assert res.returncode == 0, res.stderr
    env = json.loads(seen.read_text())
    lib = os.path.abspath(fake_lib)
    assert env["CUDA_INJECTION64_PATH"] == lib
    assert env["NVTX_INJECTION64_PATH"] == lib
    assert env["GPUACCT_LIBRARY"] == lib
    assert env["GPUACCT_OUTPUT_DIR"] == str(out.resolve())
    assert out.is_dir()
    assert env["GPUACCT_WARMUP_STEPS"] == "3"
    assert env["GPUACCT_LAUNCH_LATENCY_US"] == "45"
    assert env["GPUACCT_HOST_PAUSE_US"] == "250"
    assert env["GPUACCT_RECORD"] == "1"
    assert env["GPUACCT_QUIET"] == "1"  # the launcher prints the summary instead
    assert "GPUACCT_PYTHON" not in env
    path = env["PYTHONPATH"].split(os.pathsep)
    assert path[0] == str(SHIM / "gpuacct" / "_bootstrap")
    assert str(SHIM) in path
    assert env["_loaded"] is True  # the child's binding reached the injected library
    assert "no report written" in res.stderr


def test_run_sets_cost_environment(fake_lib: str, tmp_path: Path) -> None:
    """The cost options become the library's GPUACCT_* variables, every digit kept; their
    ranges are the library's to check (one place: inject/config.cc), so an out-of-range value
    goes through as given."""
    seen = tmp_path / "env.json"
    res = launch(["run", "--library", fake_lib, "--no-summary", "--gpu-hour-price", "2.75",
                  "--tokens-per-step", "1048577", "--samples-per-step", "1e16", "--",
                  sys.executable, "-c", CHILD, str(seen), "0"])
    assert res.returncode == 0, res.stderr
    env = json.loads(seen.read_text())
    assert float(env["GPUACCT_GPU_HOUR_PRICE"]) == 2.75
    assert float(env["GPUACCT_TOKENS_PER_STEP"]) == 1048577
    assert float(env["GPUACCT_SAMPLES_PER_STEP"]) == 1e16
    # Not given: not set (the library's default applies).
    res = launch(["run", "--library", fake_lib, "--no-summary", "--", sys.executable, "-c",
                  CHILD, str(seen), "0"])
    assert res.returncode == 0, res.stderr
    env = json.loads(seen.read_text())
    assert not {"GPUACCT_GPU_HOUR_PRICE", "GPUACCT_TOKENS_PER_STEP",
                "GPUACCT_SAMPLES_PER_STEP"} & set(env)


@pytest.mark.parametrize("value", ["nan", "inf", "cheap"])
def test_run_refuses_a_cost_that_is_not_a_number(fake_lib: str, value: str) -> None:
    res = launch(["run", "--library", fake_lib, "--gpu-hour-price", value, "--", sys.executable,
                  "-c", "pass"])
    assert res.returncode == 2
    assert f"argument --gpu-hour-price: {value!r} is not a number" in res.stderr


def test_run_relative_library_made_absolute(fake_lib: str, tmp_path: Path) -> None:
    seen = tmp_path / "env.json"
    rel = os.path.relpath(fake_lib, tmp_path)
    env = clean_env()
    res = subprocess.run([sys.executable, "-m", "gpuacct", "run", "--library", rel,
                          "--no-python", "--no-summary", "--", sys.executable, "-c", CHILD,
                          str(seen), "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(seen.read_text())
    assert os.path.isabs(got["CUDA_INJECTION64_PATH"])
    assert got["GPUACCT_PYTHON"] == "0"
    assert "GPUACCT_QUIET" not in got
    assert res.stderr == ""


def test_run_propagates_exit_status(fake_lib: str, tmp_path: Path) -> None:
    res = launch(["run", "--library", fake_lib, "--no-summary", "--", sys.executable, "-c",
                  "import sys; sys.exit(7)"])
    assert res.returncode == 7
    res = launch(["run", "--library", fake_lib, "--no-summary", "--", sys.executable, "-c",
                  "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"])
    assert res.returncode == 128 + 15


def test_run_uses_library_from_environment(fake_lib: str, tmp_path: Path) -> None:
    seen = tmp_path / "env.json"
    res = launch(["run", "--no-summary", "--", sys.executable, "-c", CHILD, str(seen), "0"],
                 env=clean_env(GPUACCT_LIBRARY=fake_lib))
    assert res.returncode == 0, res.stderr
    assert json.loads(seen.read_text())["CUDA_INJECTION64_PATH"] == fake_lib


def test_run_without_library_fails_clearly(tmp_path: Path) -> None:
    res = launch(["run", "--library", str(tmp_path / "nope.so"), "--", "true"])
    assert res.returncode == 2
    assert "no such file" in res.stderr
    res = launch(["run", "--library", str(tmp_path / "x.so")])
    assert res.returncode == 2


def test_run_missing_program(fake_lib: str) -> None:
    res = launch(["run", "--library", fake_lib, "--", "/nonexistent/program"])
    assert res.returncode == 2
    assert "cannot run" in res.stderr


def test_run_prints_summary_of_new_reports(fake_lib: str, tmp_path: Path) -> None:
    seen = tmp_path / "env.json"
    out = tmp_path / "reports"
    out.mkdir()
    # A report from an earlier run must not be printed.
    old = out / "old.json"
    old.write_text(json.dumps(make_report(
        make_rows(4, walls_ms={"compute": 10, "launch": 9}), {"steps": 2},
        {"bound": "launch", "severity": "high", "headline": "HIGHLY launch-bound: 45% of step "
         "time."})))
    os.utime(old, (1, 1))
    report = json.dumps(golden_report())
    env = clean_env(GPUACCT_CLI="/nonexistent")  # use the Python renderer
    res = launch(["run", "--library", fake_lib, "--output", str(out), "--", sys.executable,
                  "-c", CHILD, str(seen), "3", report], env=env)
    assert res.returncode == 3
    assert "gpuacct_test_1_rank-1.json" in res.stderr
    assert "verdict: data" in res.stderr
    assert "launch-bound" not in res.stderr
    assert "old.json" not in res.stderr


def test_report_command(report_file: Path, stream_file: Path) -> None:
    res = launch(["report", str(report_file)])
    assert res.returncode == 0, res.stderr
    for w in ("compute", "communication", "data", "launch", "other"):
        assert w in res.stdout
    assert "verdict: data" in res.stdout
    res = launch(["report", str(stream_file), "--json"])
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["provisional"] is True and got["verdict"]["bound"] == "data"
    assert got["summary_rows"] == 24 and got["summary"] == golden_report()["summary"]
    res = launch(["report", str(report_file.parent / "missing.json")])
    assert res.returncode == 1


def test_where(fake_lib: str) -> None:
    res = launch(["where"], env=clean_env(GPUACCT_LIBRARY=fake_lib))
    assert res.returncode == 0
    info = json.loads(res.stdout)
    assert info["library"] == fake_lib
    assert info["binding"]["loaded"] is True and info["binding"]["how"] == "loaded"


def test_console_script_declared() -> None:
    text = (SHIM / "pyproject.toml").read_text()
    assert 'gpuacct-py = "gpuacct.__main__:main"' in text


def test_run_bootstraps_python_children(fake_lib: str, tmp_path: Path) -> None:
    """From a source checkout (no .pth installed), the launcher's sitecustomize imports
    gpuacct._auto at interpreter start and then runs the sitecustomize it hides."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import os\nos.environ['HIDDEN_RAN'] = '1'\n")
    code = ("import os, sys; print('auto' if 'gpuacct._auto' in sys.modules else 'no-auto', "
            "os.environ.get('HIDDEN_RAN'), sys.modules['sitecustomize'].__file__)")
    env = clean_env(PYTHONPATH=os.pathsep.join([str(SHIM), str(hidden)]))
    res = check(launch(["run", "--library", fake_lib, "--no-summary", "--", sys.executable,
                        "-c", code], env=env))
    auto, hidden_ran, site_file = res.stdout.split()
    assert auto == "auto" and hidden_ran == "1"
    assert site_file == str(hidden / "sitecustomize.py")
    res = check(launch(["run", "--library", fake_lib, "--no-summary", "--no-python", "--",
                        sys.executable, "-c", code], env=env))
    assert res.stdout.split()[:2] == ["no-auto", "1"]


def test_run_plain_loop_from_source_checkout(fake_lib: str, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(PLAIN_LOOP)
    log = tmp_path / "calls.txt"
    env = clean_env(FAKE_GPUACCT_LOG=str(log))
    env.pop("PYTHONPATH")  # only what the launcher adds
    res = subprocess.run([sys.executable, "-m", "gpuacct", "run", "--library", fake_lib,
                          "--no-summary", "--", sys.executable, str(script), "3", "0.005", "0"],
                         env=env, cwd=SHIM, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=300)
    check(res)
    kinds = [c for _, c, _ in read_fake_log(str(log))]
    # One mark per optimizer step (3), a data range per fetch (3 + the one that ends the loop).
    assert kinds.count("step_begin") == 3 and kinds.count("data_push") == 4
