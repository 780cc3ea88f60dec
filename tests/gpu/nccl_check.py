#!/usr/bin/env python3
"""Rows of tests/gpu/check.sh's NCCL plugin step, from one run of examples/nccl_allreduce.

usage: nccl_check.py plugin|forward RUN_DIR

RUN_DIR holds the example's stdout / stderr, the gpuacct report (gpuacct_*.json) and the rows
file (*.collectives.csv).  Prints one line per table row, tab-separated: check, expected, got,
result ("ok", or "FAIL: why").  Exit 0 always: the shell counts the FAIL rows.

Expectations for ONE GPU (a single-rank communicator), as examples/nccl_allreduce.cu explains:
NCCL runs single-rank all-reduces without a task, so a profiler plugin sees only the example's
send/receive pairs to its own rank (p2p events): rows = p2p_calls, no AllReduce rows, every row
matched to its ncclDevKernel_SendRecv kernel (GPU start and end), none unmatched.  One kernel
carries several operations (the H200 run of 2026-12-04: 40 SendRecv kernels for 80 sends and
receives): each row says how many its kernel carried (kernel_ops, from NCCL's Group of the
kernel plan), and the NCCL kernels -- named by their mangled symbols in CUPTI's records
("_Z22ncclDevKernel_SendRecv...") -- count as communication.
"""
import glob
import json
import sys


def example_line(run_dir):
    """key=value pairs of the example's 'nccl_allreduce: nccl_version=...' line."""
    try:
        text = open(run_dir + "/stdout", errors="replace").read()
    except OSError:
        return {}
    for line in text.splitlines():
        if line.startswith("nccl_allreduce: nccl_version="):
            return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
    return {}


def report(run_dir):
    files = sorted(glob.glob(run_dir + "/gpuacct_*.json"))
    if not files:
        return None
    try:
        return json.load(open(files[-1]))
    except (OSError, ValueError):
        return None


def rows_file(run_dir):
    """(header dict, list of row dicts, trailer dict) or None when there is no rows file."""
    files = sorted(glob.glob(run_dir + "/*.collectives.csv"))
    if not files:
        return None
    header, trailer, columns, rows = {}, None, None, []
    for line in open(files[-1], errors="replace").read().splitlines():
        if line.startswith("# end "):
            trailer = json.loads(line[len("# end "):])
        elif line.startswith("# "):
            header = json.loads(line.split(" ", 2)[2])
        elif columns is None:
            columns = line.split(",")
        elif line:
            rows.append(dict(zip(columns, line.split(","))))
    return header, rows, trailer


def has_gpu_times(row):
    try:
        start, end = int(row.get("gpu_start_ns") or 0), int(row.get("gpu_end_ns") or 0)
    except ValueError:
        return False
    return start > 0 and end >= start


def out(check, expected, got, ok, why=""):
    result = "ok" if ok else "FAIL" + (": " + why if why else "")
    print(f"{check}\t{expected}\t{got}\t{result}")


def plugin_rows(run_dir, label, ex):
    """The rows every run has: the plugin in the report, the rows file, GPU times."""
    rep = report(run_dir)
    plugin = (rep or {}).get("collection", {}).get("nccl_plugin")
    if plugin:
        got = (f"v{plugin.get('version')}, {plugin.get('communicators')} comm, "
               f"{plugin.get('records')} records, {plugin.get('events_dropped')} dropped")
    else:
        got = "no report" if rep is None else "no nccl_plugin key"
    loaded = bool(plugin) and int(plugin.get("communicators", 0)) >= 1 and \
        int(plugin.get("version", 0)) >= 1
    out(f"{label}: NCCL loaded plugin", "v5, 1 comm", got, loaded)
    if plugin and plugin.get("forward"):
        out(f"{label}: forward note", "-", plugin["forward"][:60], True)

    want = int(ex.get("expected_plugin_rows", -1))
    rf = rows_file(run_dir)
    if rf is None:
        out(f"{label}: rows file", "nccl_plugin", "none", False,
            "no *.collectives.csv: profiler not exercised with 1 rank (see NCCL's log row)")
        return
    header, rows, trailer = rf
    identity = header.get("identity", "?")
    note = header.get("identity_note", "")
    out(f"{label}: rows identity", "nccl_plugin", identity + (f" ({note[:40]})" if note else ""),
        identity == "nccl_plugin")
    by_type = {}
    for r in rows:
        by_type[r.get("collective", "?")] = by_type.get(r.get("collective", "?"), 0) + 1
    kinds = " ".join(f"{k}={v}" for k, v in sorted(by_type.items())) or "none"
    lost = (trailer or {}).get("rows_lost", "no trailer")
    out(f"{label}: rows vs issued", f"{want} (p2p only)",
        f"{len(rows)}: {kinds}; lost {lost}; issued ar={ex.get('allreduce_calls')} "
        f"p2p={ex.get('p2p_calls')}",
        len(rows) == want and by_type.get("AllReduce", 0) == 0,
        "single-rank all-reduces reached the plugin" if by_type.get("AllReduce") else
        "profiler not exercised with 1 rank" if not rows else "rows != p2p operations issued")
    timed = sum(1 for r in rows if has_gpu_times(r))
    steps = len({r.get("step_index") for r in rows if r.get("step_index")})
    out(f"{label}: rows with GPU times", str(len(rows)), f"{timed} ({steps} steps)",
        len(rows) > 0 and timed == len(rows))
    # Operations per kernel (kernel_ops): known for every timed row.
    if rows and "kernel_ops" in rows[0]:
        counts = {}
        for r in rows:
            counts[r.get("kernel_ops") or "?"] = counts.get(r.get("kernel_ops") or "?", 0) + 1
        shown = " ".join(f"{k}x{v}" for k, v in sorted(counts.items()))
        unknown = sum(1 for r in rows if has_gpu_times(r) and not r.get("kernel_ops"))
        out(f"{label}: ops per kernel", ">= 1 each", shown, unknown == 0,
            f"{unknown} timed rows without kernel_ops")
    else:
        out(f"{label}: ops per kernel", ">= 1 each", "no kernel_ops column", False,
            "a library without shared-kernel rows")
    if rep is not None:
        unmatched = [s.get("value") for s in rep.get("stats", [])
                     if s.get("name") == "collectives_unmatched"]
        got = str(unmatched[0]) if unmatched else "0"
        out(f"{label}: unmatched", "0", got, got == "0", "records without their kernel")
        nccl = [k for k in rep.get("top_kernels", []) if "nccl" in k.get("name", "").lower()]
        if nccl:
            names = ", ".join(f"{k['name'][:34]}={'comm' if k.get('communication') else 'compute'}"
                              for k in nccl[:2])
            out(f"{label}: NCCL kernels", "communication", names,
                all(k.get("communication") for k in nccl), "an NCCL kernel taken for compute")
    if rep is not None and label == "nccl":  # the forward run is too short for a verdict
        bound = rep.get("verdict", {}).get("bound", "?")
        got = f"{bound}, {rep.get('summary', {}).get('steps', '?')} steps"
        out(f"{label}: verdict", "compute", got, bound == "compute")


def forward_rows(run_dir, ex):
    """The counting plugin named in NCCL_PROFILER_PLUGIN, behind gpuacct."""
    try:
        err = open(run_dir + "/stderr", errors="replace").read()
    except OSError:
        err = ""
    lines = [l for l in err.splitlines() if l.startswith("gpuacct_test_plugin: ")]
    p2p = int(ex.get("p2p_calls", -1))
    want = f"inits=1 p2p={p2p} coll=0"
    if not lines:
        out("forward: counting plugin", want, "no count line", False, "it was not finalized")
        return
    counts = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    got = " ".join(f"{k}={counts.get(k)}" for k in ("inits", "finalizes", "p2p", "coll",
                                                    "stops", "bad_context"))
    ok = (counts.get("inits") == "1" and counts.get("p2p") == str(p2p) and
          counts.get("coll") == "0" and counts.get("bad_context") == "0")
    out("forward: counting plugin", want, got, ok)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("plugin", "forward"):
        print("usage: nccl_check.py plugin|forward RUN_DIR", file=sys.stderr)
        return 2
    mode, run_dir = sys.argv[1], sys.argv[2]
    ex = example_line(run_dir)
    if not ex:
        out(f"nccl {mode}: example", "its summary line", "none", False, "see " + run_dir)
        return 0
    if mode == "plugin":
        out("nccl: version / ranks", "-", f"{ex.get('nccl_version')} / {ex.get('nranks')}",
            ex.get("nranks") == "1")
    plugin_rows(run_dir, "nccl" if mode == "plugin" else "forward", ex)
    if mode == "forward":
        forward_rows(run_dir, ex)
    return 0


if __name__ == "__main__":
    sys.exit(main())
