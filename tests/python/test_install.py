"""`pip install ./python_shim` builds and installs the package, the .pth hook and the
gpuacct-py console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PLAIN_LOOP, SHIM, check, clean_env, read_fake_log, venv_env


def test_pip_install_into_target(tmp_path: Path) -> None:
    target = tmp_path / "site"
    # Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    src = tmp_path / "src"
    shutil.copytree(SHIM, src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                             "__pycache__"))
    env = clean_env()
    env.pop("PYTHONPATH", None)
    env["PIP_NO_INDEX"] = "1"  # offline: no build isolation, use the installed setuptools
    res = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
         "--no-cache-dir", "--disable-pip-version-check", "-q", "--target", str(target),
         str(src)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=300, cwd=tmp_path)
    check(res)
    assert (target / "gpuacct" / "__init__.py").is_file()
    assert (target / "gpuacct" / "_auto.py").is_file()
    assert (target / "gpuacct" / "py.typed").is_file()
    # The rank files' table is a copy of the one C++ compiles in (a link in the source tree).
    table = target / "gpuacct" / "rank_files.json"
    assert table.is_file() and not table.is_symlink()
    assert table.read_text() == (SHIM.parent / "analysis" / "job" / "rank_files.json").read_text()
    pth = target / "gpuacct_auto.pth"
    assert pth.is_file(), sorted(p.name for p in target.iterdir())
    assert pth.read_text() == (SHIM / "gpuacct_auto.pth").read_text()
    script = target / "bin" / "gpuacct-py"
    assert script.is_file()
    # The installed copy works on its own (nothing from the source tree on the path).
    env["PYTHONPATH"] = str(target)
    res = subprocess.run([sys.executable, str(script), "where"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120, cwd=tmp_path)
    assert res.returncode == 1 and '"library": null' in res.stdout, res  # no library here
    res = check(subprocess.run([sys.executable, "-c", "import gpuacct; print(gpuacct.__file__)"],
                               env=env, stdout=subprocess.PIPE, text=True, cwd=tmp_path))
    assert res.stdout.startswith(str(target))


@pytest.mark.requires_torch
def test_installed_launcher_instruments_plain_loop(venv: Path, fake_lib: str,
                                                   tmp_path: Path) -> None:
    """The product path without any code change: gpuacct-py (console script) runs a plain
    torch loop; gpuacct_auto.pth imports gpuacct._auto at interpreter start (the environment
    names the library), the binding loads it, steps and data waits reach it."""
    script = tmp_path / "train.py"
    script.write_text(PLAIN_LOOP)
    log = tmp_path / "calls.txt"
    res = subprocess.run([str(venv / "bin" / "gpuacct-py"), "run", "--library", fake_lib,
                          "--output", str(tmp_path / "out"), "--",
                          str(venv / "bin" / "python"), str(script), "4", "0.01", "0"],
                         env=venv_env(FAKE_GPUACCT_LOG=str(log)), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=300, cwd=tmp_path)
    check(res)
    assert "loop done" in res.stdout
    kinds = [c for _, c, _ in read_fake_log(str(log))]
    assert kinds.count("step_begin") == 4  # one per optimizer step
    assert kinds.count("data_push") == 5 and kinds.count("data_pop") == 5
    # Same interpreter without the launcher's environment: nothing is imported or recorded.
    res = check(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sys; print('gpuacct' in sys.modules)"],
                               env=venv_env(), stdout=subprocess.PIPE, text=True))
    assert res.stdout.strip() == "False"
