#!/usr/bin/env bash
# Issue 30, a user's first hour: every bad input gets one line and a non-zero exit, tools stay
# bounded by what they write, the export chain works on ranks without a job id.
# Usage: first_hour_cli_test.sh <gpuacct binary> <repo root>
set -u
bin="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=cli/cli_test_lib.sh
. "$(dirname "$0")/cli_test_lib.sh"
sample="$root/examples/data/sample.gpuacct"

no_temporaries() {
  if ls -a "$1" | grep -q '\.tmp'; then fail "temporary file left in $1: $(ls -a "$1")"; fi
}

# synth: a preset is asked for, steps are whole numbers, and the size is checked up front.
one_line 2 "--preset NAME is needed" "$bin" synth -o "$tmp/x.gpuacct"
one_line 2 "-o FILE.gpuacct is needed" "$bin" synth --preset demo
one_line 2 "'1.5' is not a whole number" "$bin" synth --preset demo --steps 1.5 -o "$tmp/x.gpuacct"
one_line 2 "'1e3' is not a whole number" "$bin" synth --preset demo --steps 1e3 -o "$tmp/x.gpuacct"
one_line 2 "is not a whole number in [1, 64]" "$bin" synth --preset demo --devices 2.5 -o "$tmp/x.gpuacct"
# 10 million steps on 64 devices: terabytes, more than any disk here has free.
one_line 1 "are free where" "$bin" synth --preset demo --steps 10000000 --devices 64 -o "$tmp/huge.gpuacct"
[ -e "$tmp/huge.gpuacct" ] && fail "synth refused but left huge.gpuacct"
no_temporaries "$tmp"
expect 0 "wrote" "$bin" synth --preset demo --steps 3 -o "$tmp/three.gpuacct"
expect 0 "(+2 warm-up left out)" "$bin" analyze "$tmp/three.gpuacct" --no-files

# analyze: a warm-up that leaves no step is an error, worded as diff words it.
one_line 1 "No summary step: all 24 steps were left out as warm-up" \
  "$bin" analyze "$sample" --warmup 1000 --no-files
expect 1 "Leave fewer steps out as warm-up" "$bin" analyze "$sample" --warmup 1000 --no-files --json

# report: what the file is instead, and which command reads it.
one_line 1 "is a recording, not a report: \`gpuacct analyze" "$bin" report "$sample"
one_line 1 "is a profiler trace, not a report" "$bin" report "$root/tests/data/kineto/nccl_data.json.gz"
"$bin" synth --preset comm_bound --steps 8 --seed 3 -o "$tmp/r0.gpuacct" 2>/dev/null
"$bin" synth --preset comm_bound --steps 8 --seed 4 -o "$tmp/r1.gpuacct" 2>/dev/null
"$bin" analyze "$tmp/r0.gpuacct" "$tmp/r1.gpuacct" --out "$tmp/ranks" >/dev/null 2>&1
one_line 1 "is a job view (gpuacct.job/1), not a report: \`gpuacct job\`" "$bin" report "$tmp/ranks/job.json"
printf 'not json' >"$tmp/junk.txt"
one_line 1 "is not valid JSON (byte 2): not a report" "$bin" report "$tmp/junk.txt"

# The job view of ranks without bytes per collective (kernel-order identity): bus bandwidth is
# unknown, "-" in the terminal and null in job.json, never 0.0.
out="$("$bin" job "$tmp/ranks" --no-files 2>/dev/null)"
grep -qE '^ +AllReduce +[0-9]+ +[0-9.]+ +[0-9.]+ +-$' <<<"$out" ||
  { fail "busbw of collectives without bytes is not '-':"; grep -A2 "busbw" <<<"$out"; }
"$bin" job "$tmp/ranks" --no-files --json 2>/dev/null |
  python3 -c '
import json, sys
types = json.load(sys.stdin)["collectives"]["by_type"]
assert types and all(t["busbw_gbs_mean"] is None for t in types), types' ||
  fail "busbw_gbs_mean of collectives without bytes is not null"

# job --export of ranks without a job id: one is derived (the same for the same files), or given.
expect 0 "the ranks carry no job id: the export calls the job nojob-" \
  "$bin" job "$tmp/ranks/r0.report.json" "$tmp/ranks/r1.report.json" --no-files --export "$tmp/exp1"
"$bin" job "$tmp/ranks/r1.report.json" "$tmp/ranks/r0.report.json" --no-files --export "$tmp/exp2" 2>/dev/null
id1="$(sed -n 2p "$tmp/exp1/job_steps.csv" | cut -d, -f1)"
id2="$(sed -n 2p "$tmp/exp2/job_steps.csv" | cut -d, -f1)"
case "$id1" in nojob-????????) ;; *) fail "derived job id '$id1'" ;; esac
[ "$id1" = "$id2" ] || fail "derived job ids differ for the same files: $id1 $id2"
if cut -d, -f1 "$tmp/exp1/job_steps.csv" "$tmp/exp1/job_collectives.csv" | grep -qx ''; then
  fail "export rows with an empty job"
fi
expect 0 "job_steps.csv" "$bin" job "$tmp/ranks" --no-files --export "$tmp/exp3" --job-id run-7
[ "$(sed -n 2p "$tmp/exp3/job_steps.csv" | cut -d, -f1)" = run-7 ] || fail "--job-id not in the export"
one_line 2 "--job-id wants 1-128 characters" "$bin" job "$tmp/ranks" --job-id a/b --no-files

# timeline --steps A:B: those steps' rows only, the events of their span, nothing else.
"$bin" synth --preset demo --steps 40 -o "$tmp/forty.gpuacct" 2>/dev/null
expect 0 "wrote" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/all.json"
expect 0 "wrote" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/part.json" --steps 10:13
python3 - "$tmp/all.json" "$tmp/part.json" <<'PY' || fail "timeline --steps 10:13"
import json, sys
full, part = (json.load(open(p)) for p in sys.argv[1:])
def steps(t):
    return [e for e in t["traceEvents"] if e.get("cat") == "gpuacct_step"]
def abs_ns(t, e, key="ts"):  # exact: the file has whole ns as us with three decimals
    return t["otherData"]["origin_ns"] + round(e[key] * 1000)
got = sorted(e["args"]["step_index"] for e in steps(part))
assert got == [10, 11, 12], got
# The rows are the full timeline's (same window, same walls), on their own origin.
by_index = {e["args"]["step_index"]: e for e in steps(full)}
for e in steps(part):
    f = by_index[e["args"]["step_index"]]
    assert {k: v for k, v in e["args"].items()} == f["args"], (e, f)
    assert abs_ns(part, e) == abs_ns(full, f) and e["dur"] == f["dur"], (e, f)
def end(t, e):
    return abs_ns(t, e) + round(e["dur"] * 1000)
# The span: the steps' windows (host ranges lie inside them in this run).
lo = min(abs_ns(part, e) for e in steps(part))
hi = max(end(part, e) for e in steps(part))
kernels = [e for e in part["traceEvents"] if e.get("cat") == "kernel"]
assert kernels, "no kernels in the part"
for e in kernels:  # every op shown overlaps the three steps' span ...
    assert end(part, e) >= lo and abs_ns(part, e) <= hi, e
# ... and every op of the full timeline that overlaps it is shown.
want = sum(1 for e in full["traceEvents"] if e.get("cat") == "kernel"
           and end(full, e) >= lo and abs_ns(full, e) <= hi)
assert len(kernels) == want, (len(kernels), want)
walls = {e["args"]["step_index"] for e in part["traceEvents"] if e.get("cat") == "gpuacct_wall"}
assert walls == {10, 11, 12}, walls
PY
expect 0 "wrote" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/last.json" --steps 38:
expect 0 "wrote" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/first.json" --steps :1
expect 0 "wrote" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/one.json" --steps 7
[ "$(grep -o '"cat":"gpuacct_step"' "$tmp/last.json" | wc -l)" = 2 ] || fail "--steps 38: is not 2 steps"
[ "$(grep -o '"cat":"gpuacct_step"' "$tmp/one.json" | wc -l)" = 1 ] || fail "--steps 7 is not 1 step"
one_line 1 "--steps 100:200: no such step" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/none.json" --steps 100:200
[ -e "$tmp/none.json" ] && fail "timeline wrote a file for steps that do not exist"
for bad in 5:5 9:3 a:b 1.5:3 -1:4 : ""; do
  one_line 2 "--steps wants A:B" "$bin" timeline "$tmp/forty.gpuacct" -o "$tmp/bad.json" --steps "$bad"
done
no_temporaries "$tmp"

echo "first_hour_cli_test: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
