#!/usr/bin/env python3
"""Rows of tests/gpu/check.sh's hardware-counters step, from one run of an example with
GPUACCT_COUNTERS=1 GPUACCT_COUNTERS_DEBUG=1 (docs/counters.md, "GPU diagnostics").

usage: counters_check.py EXAMPLE RUN_DIR

RUN_DIR holds the gpuacct report (gpuacct_*.json).  Prints one line per table row,
tab-separated: check, expected, got, result ("ok", "-" when there is nothing to judge, or
"FAIL: why").  Exit 0 always: the shell counts the FAIL rows.

Per device of the report's collection.counters: the state; decoded samples against those due
(target >= 90 %); the trigger mode and interval set and the sample length seen; the clock the
samples were found on and the offset used; the set-up calls' times; the first three samples'
raw start / end against cuptiGetTimestamp (relative to the time just before
cuptiPmSamplingStart, and the decode that returned them); each metric's raw value in the first
five samples; the time from the start to the first sample (mapped: target within 1 ms).  Every
time is in ms relative to cuptiGetTimestamp just before cuptiPmSamplingStart, unless raw.
"""
import glob
import json
import sys


def report(run_dir):
    files = sorted(glob.glob(run_dir + "/gpuacct_*.json"))
    if not files:
        return None
    try:
        return json.load(open(files[-1]))
    except (OSError, ValueError):
        return None


def out(check, expected, got, result):
    print(f"{check}\t{expected}\t{got}\t{result}")


def ms(ns):
    return "?" if ns is None else f"{ns / 1e6:+.3f}"


def short(metric):
    return metric.split(".")[0]


def device_rows(label, d):
    dev = d.get("device")
    tag = f"{label} dev{dev}"
    state = d.get("state", "?")
    out(f"{tag}: state", "active", f"{state} {d.get('chip', '')}".strip(),
        "ok" if state == "active" else "FAIL: " + d.get("line", "")[:90])
    due, got = d.get("samples_due", 0), d.get("samples", 0)
    share = got / due if due else 0.0
    out(f"{tag}: samples / due", ">= 90%", f"{got} / {due} ({share:.0%})",
        "ok" if due and share >= 0.9 else "FAIL: fewer samples than the interval gives")
    out(f"{tag}: dropped before start", "0-1", str(d.get("samples_before_start")), "-")
    g = d.get("debug") or {}
    seen = d.get("interval_seen_ns")
    out(f"{tag}: trigger set", "gpu_time_interval",
        f"{g.get('trigger_mode', d.get('trigger'))} {g.get('sampling_interval', d.get('interval_set'))} "
        f"{g.get('interval_unit', '')}; seen {seen} ns",
        "ok" if seen is None or abs(seen - d.get("interval_set", 0)) <= 0.25 * d.get("interval_set", 1)
        else "FAIL: samples not as long as the interval set")
    off = d.get("clock_offset_ns")
    out(f"{tag}: sample clock", "activity/mapped",
        f"{d.get('clock', '?')}, offset {off} ns, first_sample_lag {d.get('first_sample_lag_ns')} ns, "
        f"bracket [{g.get('offset_low_ns')}, {g.get('offset_high_ns')}]",
        "ok" if d.get("clock") in ("activity", "mapped") else "FAIL: no consistent clock")
    start = g.get("start_before")
    if not start:
        out(f"{tag}: debug", "present", "absent", "FAIL: run with GPUACCT_COUNTERS_DEBUG=1")
        return
    rel = lambda t: ms(t - start) if t else "?"
    out(f"{tag}: set-up (ms to start)", "-",
        f"began {rel(g.get('setup_began'))} enable {rel(g.get('enable_before'))}.."
        f"{rel(g.get('enable_after'))} config {rel(g.get('set_config_after'))} "
        f"start +{(g.get('start_after', start) - start) / 1e6:.3f} stop {rel(g.get('stop_at'))}", "-")
    out(f"{tag}: decodes", "-",
        f"{g.get('decodes')} ({g.get('decodes_with_samples')} with samples), populated not "
        f"completed {g.get('populated_not_completed')}, overflows {g.get('overflows')}, "
        f"first decoded at {rel(g.get('first_sample_decoded_at'))} ms, lengths "
        f"{g.get('duration_min_ns')}..{g.get('duration_max_ns')} ns", "-")
    samples = g.get("first_samples") or []
    for i, s in enumerate(samples[:3]):
        out(f"{tag}: sample {i} raw (ms)", "-",
            f"start {rel(s['start'])} end {rel(s['end'])} (raw {s['start']}..{s['end']}); "
            f"decoded {rel(s['decode_before'])}..{rel(s['decode_after'])}", "-")
    for i, s in enumerate(samples[:5]):
        vals = " ".join(f"{short(k)}={'null' if v is None else f'{v:.2f}'}"
                        for k, v in (s.get("values") or {}).items()) or "not evaluated"
        out(f"{tag}: sample {i} values", "-", vals, "-")
    lag = g.get("start_to_first_sample_ns")
    mapped = None if lag is None or off is None else lag - off
    out(f"{tag}: start -> 1st sample", "<= 1 ms", f"raw {ms(lag)} ms, mapped {ms(mapped)} ms",
        "ok" if mapped is not None and abs(mapped) <= 1_000_000 else
        "FAIL: the first sample is not at the start once mapped")


def main():
    if len(sys.argv) != 3:
        print("usage: counters_check.py EXAMPLE RUN_DIR", file=sys.stderr)
        return 2
    label, run_dir = f"counters {sys.argv[1]}", sys.argv[2]
    rep = report(run_dir)
    if rep is None:
        out(f"{label}: report", "present", "none", "FAIL: see " + run_dir)
        return 0
    c = rep.get("collection", {}).get("counters") or {}
    devices = c.get("devices") or []
    if not devices:
        out(f"{label}: devices", ">= 1", "0", "FAIL: " + c.get("why", "no counters section"))
        return 0
    for d in devices:
        device_rows(label, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
