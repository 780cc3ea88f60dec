"""``python -m gpuacct run [options] -- program args...`` (console script ``gpuacct-py``).

Sets the injection variables to the absolute library path (CUDA_INJECTION64_PATH for the CUDA
driver, NVTX_INJECTION64_PATH for NVTX ranges, GPUACCT_LIBRARY for the Python binding), the
GPUACCT_* settings given as options, runs the program, prints the summary of each report it
wrote and exits with the program's exit status (128 + N when a signal N killed it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import _lib

# Option -> environment variable (docs/configuration.md).
ENV_OUTPUT_DIR = "GPUACCT_OUTPUT_DIR"
ENV_WARMUP = "GPUACCT_WARMUP_STEPS"
ENV_LAUNCH_LATENCY = "GPUACCT_LAUNCH_LATENCY_US"
ENV_HOST_PAUSE = "GPUACCT_HOST_PAUSE_US"
ENV_RECORD = "GPUACCT_RECORD"
ENV_PYTHON = "GPUACCT_PYTHON"
ENV_QUIET = "GPUACCT_QUIET"
# Cost (docs/cost.md).  Their ranges are checked where every other setting's are, by the
# library (inject/config.cc, limits in analysis/report/cost.h): a value out of range gets its
# one-line warning there and is not used.
ENV_GPU_HOUR_PRICE = "GPUACCT_GPU_HOUR_PRICE"
ENV_TOKENS_PER_STEP = "GPUACCT_TOKENS_PER_STEP"
ENV_SAMPLES_PER_STEP = "GPUACCT_SAMPLES_PER_STEP"


@dataclass
class RunOptions:
    command: List[str]
    output: Optional[str] = None
    warmup: Optional[int] = None
    launch_latency_us: Optional[int] = None
    host_pause_us: Optional[int] = None
    record: bool = False
    library: Optional[str] = None
    python: bool = True
    summary: bool = True
    gpu_hour_price: Optional[float] = None
    tokens_per_step: Optional[float] = None
    samples_per_step: Optional[float] = None
    extra_env: Dict[str, str] = field(default_factory=dict)


class LauncherError(RuntimeError):
    pass


def _package_parent() -> Optional[str]:
    """Directory to put on the child's PYTHONPATH so the library's ``import gpuacct._auto``
    works: only for a source checkout (never a site-packages directory, which would leak one
    interpreter's packages into another)."""
    parent = Path(__file__).resolve().parent.parent
    if parent.name in ("site-packages", "dist-packages"):
        return None
    return str(parent)


def build_env(opts: RunOptions, base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ if base is None else base)
    if opts.library and not os.path.isfile(opts.library):
        raise LauncherError(f"--library {opts.library}: no such file")
    lib = opts.library or _lib.find_library()
    if not lib or not os.path.isfile(lib):
        searched = ", ".join(_lib.env_library_paths() + _lib.fallback_library_paths())
        raise LauncherError(
            "libgpuacct.so not found: pass --library PATH, set GPUACCT_LIBRARY, or build it "
            "(cmake --build build --target gpuacct); searched: " + (searched or "nothing"))
    lib = os.path.abspath(lib)
    env["CUDA_INJECTION64_PATH"] = lib
    env["NVTX_INJECTION64_PATH"] = lib
    env["GPUACCT_LIBRARY"] = lib
    if opts.output is not None:
        out = os.path.abspath(opts.output)
        os.makedirs(out, exist_ok=True)
        env[ENV_OUTPUT_DIR] = out
    if opts.warmup is not None:
        env[ENV_WARMUP] = str(int(opts.warmup))
    if opts.launch_latency_us is not None:
        env[ENV_LAUNCH_LATENCY] = str(int(opts.launch_latency_us))
    if opts.host_pause_us is not None:
        env[ENV_HOST_PAUSE] = str(int(opts.host_pause_us))
    for name, value in ((ENV_GPU_HOUR_PRICE, opts.gpu_hour_price),
                        (ENV_TOKENS_PER_STEP, opts.tokens_per_step),
                        (ENV_SAMPLES_PER_STEP, opts.samples_per_step)):
        if value is not None:
            env[name] = repr(float(value))  # every digit: the library parses it with strtod
    if opts.record:
        env[ENV_RECORD] = "1"
    if not opts.python:
        env[ENV_PYTHON] = "0"
    if opts.summary and ENV_QUIET not in env:
        # The launcher prints each report's summary once the program ended (after its output);
        # the library would print it too, process by process.
        env[ENV_QUIET] = "1"
    # Python programs: gpuacct/_bootstrap/sitecustomize.py imports gpuacct._auto at start (as
    # the pip-installed .pth does), and a source checkout's package directory is made
    # importable.  Python ignores both only in isolated mode (-I / -E).
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    boot = str(Path(__file__).resolve().parent / "_bootstrap")
    parts = [boot] + [p for p in parts if p != boot]
    parent = _package_parent()
    if parent and parent not in parts:
        parts.append(parent)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env.update(opts.extra_env)
    return env


def _is_python_script(path: str) -> bool:
    """A console script (``#!...python``): pip's ``gpuacct`` entry, never the C++ tool."""
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return True  # unreadable: not something to exec either
    return first.startswith(b"#!") and b"python" in first


def cli_candidates(library: Optional[str]) -> List[str]:
    """Where the C++ ``gpuacct`` tool is looked for, in order: GPUACCT_CLI, the build tree next
    to the library, then every ``gpuacct`` on PATH (all of them, not only the first: pip's
    ``gpuacct`` console script may come before the C++ tool)."""
    cands: List[str] = []
    if os.environ.get("GPUACCT_CLI"):
        cands.append(os.environ["GPUACCT_CLI"])
    if library:
        build = Path(library).resolve().parent.parent
        cands.append(str(build / "bin" / "gpuacct"))
        cands.append(str(build / "cli" / "gpuacct"))
    for d in os.get_exec_path():
        cands.append(os.path.join(d or os.curdir, "gpuacct"))
    return cands


def find_cli(library: Optional[str]) -> Optional[str]:
    """The C++ ``gpuacct`` CLI (cli_candidates): the first that is an executable and not a
    Python console script."""
    for c in cli_candidates(library):
        if os.path.isfile(c) and os.access(c, os.X_OK) and not _is_python_script(c):
            return os.path.abspath(c)
    return None


def print_summaries(reports: Sequence[str], library: Optional[str], out=None) -> None:
    out = out or sys.stderr
    cli = find_cli(library)
    for path in reports:
        text = None
        if cli:
            try:
                res = subprocess.run([cli, "report", path], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, timeout=60)
                if res.returncode == 0 and res.stdout.strip():
                    text = res.stdout.decode("utf-8", "replace")
            except (OSError, subprocess.SubprocessError):
                text = None
        if text is None:
            from .results import load
            from .summary import render
            try:
                text = render(load(path))
            except Exception as e:  # a broken report must not hide the exit status
                text = f"gpuacct: could not read {path}: {e}\n"
        out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def run(opts: RunOptions) -> int:
    if not opts.command:
        raise LauncherError("no program given: gpuacct-py run [options] -- program args...")
    env = build_env(opts)
    out_dir = env.get(ENV_OUTPUT_DIR) or os.getcwd()
    start = time.time()
    try:
        proc = subprocess.Popen(opts.command, env=env)
    except OSError as e:
        raise LauncherError(f"cannot run {opts.command[0]!r}: {e}") from e
    # The child shares the terminal's process group and gets Ctrl-C itself; wait for it.
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forward = lambda signum, _frame: proc.send_signal(signum)  # noqa: E731
        old_term = signal.signal(signal.SIGTERM, forward)
        try:
            rc = proc.wait()
        finally:
            signal.signal(signal.SIGTERM, old_term)
    finally:
        signal.signal(signal.SIGINT, old)
    code = 128 - rc if rc < 0 else rc
    if opts.summary:
        from .results import find_reports
        reports = find_reports(out_dir, newer_than=start)
        if reports:
            print_summaries(reports, env.get("GPUACCT_LIBRARY"))
        else:
            sys.stderr.write(f"gpuacct: no report written in {out_dir}\n")
    return code
