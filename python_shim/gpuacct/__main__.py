"""Command line: ``python -m gpuacct`` / ``gpuacct`` / ``gpuacct-py``.

  run     [options] -- program args...   profile a program (sets the injection variables)
  report  FILE                           print the terminal summary of a report / stream
  plot    FILE -o walls.png              per-step wall chart
  where                                  which libgpuacct.so would be used, and why

  analyze, synth, timeline               handed to the C++ ``gpuacct`` CLI (GPUACCT_CLI, the
                                         build tree next to the library, or PATH)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

# Subcommands import what they need; `python -m gpuacct run` never imports pandas or matplotlib
# before the program ran.


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuacct-py",
        description="gpuacct (Python): where each training step's time goes.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    sub.required = True

    r = sub.add_parser("run", help="run a program with libgpuacct.so injected",
                       usage="%(prog)s [options] -- program [args...]")
    r.add_argument("--output", "-o", metavar="DIR", help="report directory (GPUACCT_OUTPUT_DIR)")
    r.add_argument("--warmup", type=int, metavar="N",
                   help="steps left out of the summary (GPUACCT_WARMUP_STEPS)")
    r.add_argument("--launch-latency-us", type=int, metavar="X",
                   help="launch-latency threshold in us (GPUACCT_LAUNCH_LATENCY_US)")
    r.add_argument("--host-pause-us", type=int, metavar="X",
                   help="host-pause threshold in us (GPUACCT_HOST_PAUSE_US)")
    r.add_argument("--record", action="store_true",
                   help="also write the raw event recording (GPUACCT_RECORD=1)")
    r.add_argument("--library", metavar="PATH", help="libgpuacct.so to inject")
    r.add_argument("--no-python", action="store_true",
                   help="no Python auto-instrumentation (GPUACCT_PYTHON=0)")
    r.add_argument("--no-summary", action="store_true", help="do not print the summary")
    r.add_argument("command", nargs=argparse.REMAINDER, help="program and its arguments")

    rep = sub.add_parser("report", help="print the summary of a report or step stream")
    rep.add_argument("file")
    rep.add_argument("--json", action="store_true", help="print summary and verdict as JSON")

    pl = sub.add_parser("plot", help="stacked bar per step of the five walls")
    pl.add_argument("file")
    pl.add_argument("-o", "--output", default="walls.png", help="image file (default walls.png)")
    pl.add_argument("--device", type=int, help="one device instead of the mean over devices")
    pl.add_argument("--width", type=float, default=10.0, help="inches (default 10)")
    pl.add_argument("--height", type=float, default=5.0, help="inches (default 5)")
    pl.add_argument("--dpi", type=int, default=100, help="dots per inch (default 100)")

    sub.add_parser("where", help="which libgpuacct.so would be used")
    return p


# Commands that only the C++ CLI implements.
_CLI_COMMANDS = ("analyze", "synth", "timeline")


def _delegate_to_cli(argv: List[str]) -> int:
    import os

    from . import _lib
    from .launcher import find_cli
    cli = find_cli(_lib.find_library())
    if cli is None:
        sys.stderr.write(f"gpuacct: '{argv[0]}' is a command of the C++ gpuacct tool, which was "
                         "not found (build it, or set GPUACCT_CLI to its path)\n")
        return 2
    os.execv(cli, [cli] + argv)
    return 2  # not reached


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _CLI_COMMANDS:
        return _delegate_to_cli(argv)
    args = _parser().parse_args(argv)
    if args.cmd == "run":
        from .launcher import LauncherError, RunOptions, run
        command = list(args.command)
        if command and command[0] == "--":
            command = command[1:]
        opts = RunOptions(command=command, output=args.output, warmup=args.warmup,
                          launch_latency_us=args.launch_latency_us,
                          host_pause_us=args.host_pause_us, record=args.record,
                          library=args.library, python=not args.no_python,
                          summary=not args.no_summary)
        try:
            return run(opts)
        except LauncherError as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 2
    if args.cmd == "report":
        from .results import ReportError, load
        from .summary import render
        try:
            run_ = load(args.file)
        except (OSError, ReportError) as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 1
        if args.json:
            print(json.dumps({"summary": run_.summary, "verdict": run_.verdict,
                              "provisional": run_.provisional,
                              "summary_rows": run_.summary_rows, "data_loss": run_.data_loss,
                              "rows_lost": run_.rows_lost}, indent=2))
        else:
            sys.stdout.write(render(run_))
        return 0
    if args.cmd == "plot":
        from .plot import MissingDependency, plot_walls
        from .results import ReportError
        try:
            plot_walls(args.file, args.output, device=args.device, width=args.width,
                       height=args.height, dpi=args.dpi)
        except MissingDependency as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 3
        except (OSError, ReportError) as e:
            sys.stderr.write(f"gpuacct-py: {e}\n")
            return 1
        print(args.output)
        return 0
    if args.cmd == "where":
        from . import _lib
        from .launcher import find_cli
        lib = _lib.find_library()
        info = {"library": lib, "cli": find_cli(lib), "binding": _lib.status()}
        print(json.dumps(info, indent=2))
        return 0 if lib else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
