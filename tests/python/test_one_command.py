"""One name, `gpuacct`, does every documented command whichever comes first on PATH: pip's
console script (a Python script named gpuacct) or the C++ tool (issue 30, item 1).

PATH is the venv's bin/ (pip's `gpuacct`, `gpuacct-py`, `python`) and a folder holding the C++
tool, in both orders, before the system's; nothing else points at either (no GPUACCT_CLI, no
build tree next to a library the package finds)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import GOLDEN_REPORT, SHIM, build_dir, check, venv_env

SAMPLE = SHIM.parent / "examples" / "data" / "sample.gpuacct"


def _env(venv: Path, cpp_dir: Path, pip_first: bool) -> Dict[str, str]:
    dirs = [str(venv / "bin"), str(cpp_dir)]
    if not pip_first:
        dirs.reverse()
    return venv_env(PATH=os.pathsep.join(dirs + ["/usr/bin", "/bin"]))


@pytest.fixture(scope="module")
def cpp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the C++ tool as `gpuacct` (a link, as `make install` or a user's ~/bin)."""
    cli = build_dir() / "bin" / "gpuacct"
    assert cli.is_file(), f"{cli} is not built"
    d = tmp_path_factory.mktemp("cpp_bin")
    (d / "gpuacct").symlink_to(cli)
    return d


def _gpuacct(args: List[str], env: Dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["gpuacct", *args], env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)


@pytest.mark.parametrize("pip_first", [True, False], ids=["pip_first", "cpp_first"])
def test_every_documented_command_whichever_comes_first(venv: Path, cpp_dir: Path,
                                                        real_lib: str, tmp_path: Path,
                                                        pip_first: bool) -> None:
    env = _env(venv, cpp_dir, pip_first)
    first = subprocess.run(["sh", "-c", "command -v gpuacct"], env=env, stdout=subprocess.PIPE,
                           text=True, check=True).stdout.strip()
    with open(first, "rb") as f:  # the order asked for is the order PATH gives
        assert f.read(2) == b"#!" if pip_first else f.read(4) == b"\x7fELF", first

    def ok(*args: str) -> str:
        res = check(_gpuacct(list(args), env, tmp_path))
        return res.stdout + res.stderr

    assert "commands:" in ok("--help")
    assert "verdict: HIGHLY data-bound" in ok("analyze", str(SAMPLE), "--out", "out")
    report = tmp_path / "out" / "sample.report.json"
    assert "cost: $" in ok("report", str(report), "--gpu-hour-price", "3")
    res = check(_gpuacct(["report", str(GOLDEN_REPORT), "--json"], env, tmp_path))
    assert json.loads(res.stdout)["verdict"]["bound"] == "data"
    assert "no significant change" in ok("diff", str(SAMPLE), str(SAMPLE),
                                         "--fail-if-slower", "5%")
    ok("synth", "--preset", "comm_bound", "--steps", "8", "--seed", "3", "-o", "r0.gpuacct")
    ok("synth", "--preset", "comm_bound", "--steps", "8", "--seed", "4", "-o", "r1.gpuacct")
    assert "wrote t.json" in ok("timeline", "r0.gpuacct", "-o", "t.json", "--steps", "2:4")
    assert "2 ranks on 1 host" in ok("job", "r0.gpuacct", "r1.gpuacct", "--no-files",
                                     "--export", "export")
    assert "steps 16 rows" in ok("job-parquet", "export", "job.parquet")
    assert "slowest_ranks:" in ok("job-query", "--list")
    assert "nojob-" in ok("job-query", "job.parquet", "slowest_ranks")
    assert "collectives" in ok("job-export", "r0.gpuacct", "r1.gpuacct", "-o", "job2.parquet",
                               "--job-id", "run-7")
    assert "run-7" in ok("job-query", "job2.parquet", "host_step_times")
    assert ok("plot", str(report), "-o", "walls.png").strip().endswith("walls.png")
    assert (tmp_path / "walls.png").stat().st_size > 1000
    assert "hello from the program" in ok("run", "--library", real_lib, "--no-summary", "--",
                                          "python", "-c", "print('hello from the program')")
    res = check(_gpuacct(["where"], dict(env, GPUACCT_LIBRARY=real_lib), tmp_path))
    assert os.path.realpath(json.loads(res.stdout)["cli"]) == str(build_dir() / "bin" / "gpuacct")


def test_pip_command_without_the_cpp_tool_says_where_it_looked(venv: Path,
                                                               tmp_path: Path) -> None:
    env = venv_env(PATH=os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]))
    res = _gpuacct(["analyze", str(SAMPLE)], env, tmp_path)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "every gpuacct on PATH" in res.stderr, res.stderr
    # report has a Python fallback: the summary of a report, without the C++ tool.
    res = check(_gpuacct(["report", str(GOLDEN_REPORT)], env, tmp_path))
    assert "data-bound" in res.stdout
