"""One name for both halves of the tool: the Python entry hands analyze/diff/job/synth/timeline to
the C++ CLI, and the C++ CLI hands run/plot/where/job-* to this package (the PATH orders:
test_one_command.py)."""

import subprocess
import sys

from conftest import build_dir, check, clean_env, SHIM


def _cli() -> str:
    cli = build_dir() / "bin" / "gpuacct"
    assert cli.is_file(), f"{cli} is not built"
    return str(cli)


def test_python_entry_hands_analyze_to_the_cpp_cli(tmp_path):
    sample = SHIM.parent / "examples" / "data" / "sample.gpuacct"
    res = subprocess.run([sys.executable, "-m", "gpuacct", "analyze", str(sample), "--no-files"],
                         env=clean_env(GPUACCT_CLI=_cli()), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    check(res)
    assert "verdict: HIGHLY data-bound" in res.stdout


def test_python_entry_hands_diff_to_the_cpp_cli(tmp_path):
    sample = SHIM.parent / "examples" / "data" / "sample.gpuacct"
    res = subprocess.run([sys.executable, "-m", "gpuacct", "diff", str(sample), str(sample),
                          "--fail-if-slower", "0%"],
                         env=clean_env(GPUACCT_CLI=_cli()), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=120)
    check(res)
    assert "no significant change in step time (23.46 -> 23.46 ms/step" in res.stdout


def test_python_entry_without_cpp_cli_says_so(tmp_path):
    env = clean_env(GPUACCT_CLI="/nonexistent/gpuacct", PATH="/usr/bin:/bin")
    res = subprocess.run([sys.executable, "-m", "gpuacct", "synth", "--preset", "demo"],
                         env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=60)
    # Either the build tree's CLI was found through the library search, or a clear message.
    if res.returncode == 2 and "C++ gpuacct tool" in res.stderr:
        return
    assert "gpuacct synth: where to? -o FILE.gpuacct is needed" in res.stderr


def test_cpp_cli_hands_run_to_the_launcher(tmp_path):
    out = tmp_path / "out"
    env = clean_env(GPUACCT_PYTHON_EXE=sys.executable)
    env.pop("PYTHONPATH")  # the C++ CLI must find the package in the source tree itself
    res = subprocess.run([_cli(), "run", "--output", str(out), "--no-summary", "--",
                          sys.executable, "-c", "print('hello from the program')"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120)
    check(res)
    assert "hello from the program" in res.stdout
