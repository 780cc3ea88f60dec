#!/usr/bin/env bash
# CLI behaviour a person relies on: exit codes, one clear message, no partial files.
# Usage: cli_test.sh <gpuacct binary> <repo root>
set -u
bin="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=cli/cli_test_lib.sh
. "$(dirname "$0")/cli_test_lib.sh"

expect 2 "usage: gpuacct" "$bin"
expect 0 "commands:" "$bin" --help
expect 2 "unknown command 'frobnicate'" "$bin" frobnicate
expect 2 "unknown option '--bogus'" "$bin" analyze --bogus x
expect 2 "no input given" "$bin" analyze
expect 2 "is not a number" "$bin" analyze --warmup abc "$root/examples/data/sample.gpuacct"
expect 2 "is not a whole number" "$bin" analyze --warmup 2.5 "$root/examples/data/sample.gpuacct"
expect 2 "needs a value" "$bin" analyze "$root/examples/data/sample.gpuacct" --out
expect 1 "no such file" "$bin" analyze "$tmp/missing.gpuacct" --out "$tmp/o1"
expect 0 "usage: gpuacct analyze" "$bin" analyze --help
# The accounting options and their defaults (AccountingConfig's) are the same in both commands.
expect 0 "below X us (default 30)" "$bin" analyze --help
expect 0 "X us (default 100)" "$bin" timeline --help
expect 0 "(default: 2 for" "$bin" timeline --help
expect 2 "is not a whole number" "$bin" timeline --warmup 1.5 x -o y

# An input that is not a regular file says what it is (not "no such file").
mkdir -p "$tmp/adir"
mkfifo "$tmp/afifo"
ln -s "$tmp/loop_b" "$tmp/loop_a"
ln -s "$tmp/loop_a" "$tmp/loop_b"
expect 1 "adir: is a directory" "$bin" analyze "$tmp/adir" --no-files
expect 1 "afifo: is a named pipe (FIFO)" "$bin" analyze "$tmp/afifo" --no-files
expect 1 "/dev/zero: is a character device" "$bin" analyze /dev/zero --no-files
expect 1 "symbolic link loop" "$bin" analyze "$tmp/loop_a" --no-files
expect 1 "afifo: is a named pipe (FIFO)" "$bin" timeline "$tmp/afifo" -o "$tmp/t.json"
expect 1 "adir: is a directory" "$bin" report "$tmp/adir"

# Outputs never replace what is not a regular file: a character device is written in place, a
# symbolic link keeps pointing at the file it names, a directory is refused.
"$bin" synth --preset demo --steps 4 -o "$tmp/small.gpuacct" 2>/dev/null
if [ "$(id -u)" = 0 ]; then mknod "$tmp/null" c 1 3; else ln -s /dev/null "$tmp/null"; fi
expect 0 "wrote" "$bin" timeline "$tmp/small.gpuacct" -o "$tmp/null"
[ -c "$tmp/null" ] || { echo "FAIL: timeline -o replaced a character device"; fails=$((fails + 1)); }
echo old >"$tmp/real.json"
ln -s real.json "$tmp/link.json"
expect 0 "wrote" "$bin" timeline "$tmp/small.gpuacct" -o "$tmp/link.json"
{ [ -L "$tmp/link.json" ] && grep -q traceEvents "$tmp/real.json"; } ||
  { echo "FAIL: timeline -o replaced a symbolic link"; fails=$((fails + 1)); }
expect 1 "is a directory" "$bin" timeline "$tmp/small.gpuacct" -o "$tmp/adir"
ls "$tmp" | grep -q '\.tmp\.' && { echo "FAIL: temporary file left: $(ls "$tmp")"; fails=$((fails + 1)); }

# A broken input: clear error, non-zero exit, and no report files left behind.
printf '{"traceEvents": [ {"ph": "X", "cat": "kernel", "ts": 1' >"$tmp/broken.json"
expect 1 "broken.json" "$bin" analyze "$tmp/broken.json" --out "$tmp/o2"
if ls "$tmp/o2" 2>/dev/null | grep -q .; then
  echo "FAIL: files written for a broken input: $(ls "$tmp/o2")"
  fails=$((fails + 1))
fi
: >"$tmp/empty.gpuacct"
expect 1 "empty.gpuacct" "$bin" analyze "$tmp/empty.gpuacct" --out "$tmp/o3"
# A recording cut off (its writer was killed): read up to its last whole chunk, said in one line
# (docs/recording_format.md); a finished file cut inside is corrupt (its END chunk is there).
head -c 1000 "$root/examples/data/sample.gpuacct" >"$tmp/cut.gpuacct"
expect 0 "the recording was not finished (its writer was killed?): read 1 whole chunks up to byte 473" \
  "$bin" analyze "$tmp/cut.gpuacct" --out "$tmp/o4"
expect 0 "the recording was not finished" "$bin" timeline "$tmp/cut.gpuacct" -o "$tmp/cut.json"
{ head -c 1000 "$root/examples/data/sample.gpuacct"; tail -c 24 "$root/examples/data/sample.gpuacct"; } \
  >"$tmp/cut_inside.gpuacct"
expect 1 "truncated chunk" "$bin" analyze "$tmp/cut_inside.gpuacct" --no-files
# Crafted recordings: a WATERMARK chunk without its value (48 bytes; SIGSEGV before), metadata
# numbers out of range (a pid of -2^63 before).  Version-1 layout: no checksums to forge.
python3 - "$tmp" <<'PY'
import json, struct, sys
head = b"GPUACCT\x01" + struct.pack("<II", 1, 0)
chunk = lambda t, n, p=b"": struct.pack("<IIQ", t, n, len(p)) + p
open(sys.argv[1] + "/wm0.gpuacct", "wb").write(head + chunk(6, 0) + chunk(9, 0))
meta = json.dumps({"rank": 1e300, "pid": 1e300}).encode()
open(sys.argv[1] + "/meta.gpuacct", "wb").write(head + chunk(7, 1, meta) + chunk(9, 0))
PY
expect 1 "malformed watermark chunk at byte 16" "$bin" analyze "$tmp/wm0.gpuacct" --no-files
expect 1 "malformed watermark chunk at byte 16" "$bin" timeline "$tmp/wm0.gpuacct" -o "$tmp/wm0.json"
expect 1 "metadata field 'pid' is not an integer in range" "$bin" analyze "$tmp/meta.gpuacct" --no-files
# A flipped bit in a chunk is caught by its checksum.
cp "$root/examples/data/sample.gpuacct" "$tmp/flip.gpuacct"
printf '\x55' | dd of="$tmp/flip.gpuacct" bs=1 seek=5000 conv=notrunc 2>/dev/null
expect 1 "fails its checksum" "$bin" analyze "$tmp/flip.gpuacct" --no-files

# The main job on the bundled sample.
expect 0 "verdict: HIGHLY data-bound" "$bin" analyze "$root/examples/data/sample.gpuacct" --out "$tmp/out"
[ -s "$tmp/out/sample.report.json" ] || { echo "FAIL: no report written"; fails=$((fails + 1)); }
[ -s "$tmp/out/sample.steps.csv" ] || { echo "FAIL: no CSV written"; fails=$((fails + 1)); }
ls "$tmp/out" | grep -q tmp && { echo "FAIL: temporary file left: $(ls "$tmp/out")"; fails=$((fails + 1)); }
expect 0 "verdict: HIGHLY data-bound" "$bin" report "$tmp/out/sample.report.json"
expect 0 '"schema": "gpuacct.report/1"' "$bin" analyze "$root/examples/data/sample.gpuacct" --no-files --json
# Cost (docs/cost.md): the money line with a price; none without one (the report unchanged).
sample_cost='cost: $0.0000195/step, $0.0195 per 1,000 steps, $72.00/day on 1 GPU; the data wall costs $20.44/day'
expect 0 "$sample_cost" "$bin" analyze "$root/examples/data/sample.gpuacct" --gpu-hour-price 3.0 --out "$tmp/priced"
expect 0 '$6.26 per hour the GPU actually computed ($4.79 per hour nvidia-smi calls busy, 63%)' \
  "$bin" analyze "$root/examples/data/sample.gpuacct" --gpu-hour-price 3 --no-files
grep -qF '"gpu_hour_price": 3.0' "$tmp/priced/sample.report.json" ||
  { echo "FAIL: no cost section in the priced report"; fails=$((fails + 1)); }
grep -qF '"cost"' "$tmp/out/sample.report.json" &&
  { echo "FAIL: a cost section without a price"; fails=$((fails + 1)); }
"$bin" report "$tmp/out/sample.report.json" | grep -qF 'cost:' &&
  { echo "FAIL: a money line without a price"; fails=$((fails + 1)); }
expect 0 "$sample_cost" "$bin" report "$tmp/out/sample.report.json" --gpu-hour-price 3
expect 0 "$sample_cost" "$bin" report "$tmp/priced/sample.report.json"
expect 0 '$144.00/day on 1 GPU' "$bin" report "$tmp/priced/sample.report.json" --gpu-hour-price=6
expect 2 "option '--gpu-hour-price': 'free' is not a number" \
  "$bin" analyze "$root/examples/data/sample.gpuacct" --gpu-hour-price free --no-files
expect 2 "is not a number in [0, 1000000]" "$bin" report "$tmp/out/sample.report.json" --gpu-hour-price -1
expect 0 "--gpu-hour-price P" "$bin" analyze --help
expect 0 "--gpu-hardware-cost C" "$bin" report --help
# Owned GPUs (per GPU: $21,915 over 30 months + $730.50 a month = $2.00 an hour, + $0.50 power).
owned=(--gpu-hardware-cost 21915 --amortization-months 30 --facility-per-month 730.5 --power-per-gpu-hour 0.5)
expect 0 '$60.00/day on 1 GPU' "$bin" analyze "$root/examples/data/sample.gpuacct" --no-files "${owned[@]}"
expect 0 '$2.50 per GPU-hour (owned, used day and night)' "$bin" report "$tmp/out/sample.report.json" "${owned[@]}"
expect 0 'owning pays above 584 GPU-hours a month per GPU (80% use) and costs $2.50 per GPU-hour used day and night, $5.22 per hour computed' \
  "$bin" report "$tmp/out/sample.report.json" "${owned[@]}" --gpu-hour-price 3
# Declared work: 4,096 tokens and 8 samples a 23.46 ms step on 1 GPU.
expect 0 '$0.00477 per million tokens (174604 tokens/s per GPU); $0.00244 per 1,000 samples (341.0 samples/s per GPU)' \
  "$bin" analyze "$root/examples/data/sample.gpuacct" --no-files --gpu-hour-price 3 --tokens-per-step 4096 --samples-per-step 8
expect 2 "needs the months it is amortized over" "$bin" report "$tmp/out/sample.report.json" --gpu-hardware-cost 30000
echo '{"a": 1}' >"$tmp/other.json"
expect 1 "not a gpuacct report" "$bin" report "$tmp/other.json"
echo '{"a": ' >"$tmp/bad.json"
expect 1 "not valid JSON" "$bin" report "$tmp/bad.json"

# A live run's step stream (inject/output/step_stream.h), here the sample's rows behind a stream header,
# without the closing line and with a cut last line, as a killed job leaves it: `report` and
# `analyze` summarise every row, say what was cut, and count it; `timeline` needs events.
python3 - "$tmp/out/sample.report.json" "$tmp/run.steps.jsonl" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["steps"]
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"schema": "gpuacct.steps/1", "source": "injected", "hostname": "h",
                        "pid": 7, "rank": 0}) + "\n")
    for r in rows:
        f.write(json.dumps(r) + "\n")
    f.write('{"step_index": 99, "ste')
PY
expect 0 "verdict: HIGHLY data-bound" "$bin" report "$tmp/run.steps.jsonl"
expect 0 "the stream has no closing summary line" "$bin" report "$tmp/run.steps.jsonl"
expect 0 "a cut last line of 23 bytes left out" "$bin" report "$tmp/run.steps.jsonl"
expect 0 "data loss: inputs whose writer was killed" "$bin" report "$tmp/run.steps.jsonl"
"$bin" analyze "$tmp/run.steps.jsonl" --no-files --json 2>/dev/null >"$tmp/stream_report.json"
python3 - "$tmp/out/sample.report.json" "$tmp/stream_report.json" <<'PY' ||
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["steps"] == b["steps"], "rows differ"
assert a["summary"]["walls"] == b["summary"]["walls"], "walls differ"
assert a["verdict"]["headline"] == b["verdict"]["headline"], "verdicts differ"
assert b["cut_off"]["bytes_cut"] == 23, b["cut_off"]
PY
  { echo "FAIL: analyze of the step stream differs from the sample's report"; fails=$((fails + 1)); }
expect 1 "holds accounted step rows" "$bin" timeline "$tmp/run.steps.jsonl" -o "$tmp/s.json"
# A stream's outputs drop ".steps.jsonl" whole: run.report.json, not run.steps.report.json.
expect 0 "run.report.json" "$bin" analyze "$tmp/run.steps.jsonl" --out "$tmp/stream_out"
[ -f "$tmp/stream_out/run.report.json" ] ||
  { echo "FAIL: analyze of run.steps.jsonl wrote $(ls "$tmp/stream_out")"; fails=$((fails + 1)); }

# synth round trip.
expect 2 "unknown synthetic preset 'nope'" "$bin" synth --preset nope -o "$tmp/x.gpuacct"
expect 0 "wrote" "$bin" synth --preset launch_bound --steps 6 -o "$tmp/l.gpuacct"
expect 0 "launch-bound" "$bin" analyze "$tmp/l.gpuacct" --no-files
"$bin" synth --preset comm_bound --steps 6 -o "$tmp/c.gpuacct" 2>/dev/null
expect 0 "communication-bound" "$bin" analyze "$tmp/c.gpuacct" --no-files

# A recording that marks no steps gets them detected.
"$bin" synth --preset balanced --steps 9 --no-steps -o "$tmp/ns.gpuacct" 2>/dev/null
expect 0 "steps detected automatically" "$bin" analyze "$tmp/ns.gpuacct" --no-files
expect 0 "gpuacct - 9 steps" "$bin" analyze "$tmp/ns.gpuacct" --no-files --warmup 0
# ... and `timeline` accounts it as `analyze` does (it ran no step detection: 0 steps), with the
# same warm-up default per source (2 for recordings, none for profiler traces: it marked 2).
expect 0 "9 steps)" "$bin" timeline "$tmp/ns.gpuacct" -o "$tmp/ns.timeline.json"
[ "$(grep -o '(warm-up)' "$tmp/ns.timeline.json" | wc -l)" = 2 ] ||
  { echo "FAIL: timeline of a recording: not 2 warm-up steps"; fails=$((fails + 1)); }
expect 0 "3 steps)" "$bin" timeline "$root/tests/data/kineto/nccl_data.json.gz" -o "$tmp/k.timeline.json"
if grep -q '(warm-up)' "$tmp/k.timeline.json"; then
  echo "FAIL: timeline of a profiler trace marks warm-up steps (analyze marks none)"
  fails=$((fails + 1))
fi

# Several ranks: one report each, plus the job view (collectives by kernel order).
"$bin" synth --preset comm_bound --steps 8 --seed 3 -o "$tmp/r0.gpuacct" 2>/dev/null
"$bin" synth --preset comm_bound --steps 8 --seed 4 -o "$tmp/r1.gpuacct" 2>/dev/null
expect 0 "2 ranks on 1 host, 6 steps compared" "$bin" analyze "$tmp/r0.gpuacct" "$tmp/r1.gpuacct" --out "$tmp/ranks"
grep -q '"schema": "gpuacct.job/1"' "$tmp/ranks/job.json" 2>/dev/null ||
  { echo "FAIL: no job.json"; fails=$((fails + 1)); }
# ... and the reports it wrote are inputs again: to `analyze` (recognised by content, shown as
# written) and to `gpuacct job` (a directory of rank outputs).
expect 0 "2 ranks on 1 host, 6 steps compared" "$bin" analyze "$tmp/ranks/r0.report.json" "$tmp/ranks/r1.report.json" --no-files
expect 0 "2 ranks on 1 host, 6 steps compared" "$bin" job "$tmp/ranks" --no-files
expect 0 "job_steps.csv (16 rows)" "$bin" job "$tmp/ranks" --no-files --export "$tmp/exp"
head -1 "$tmp/exp/job_steps.csv" 2>/dev/null | grep -q '^job,host,rank,step_index,.*,clock_offset_ns,job_step_ns,waited_ns,late_ns$' &&
  head -1 "$tmp/exp/job_collectives.csv" | grep -q '^job,host,rank,step_index,comm,seq,.*,busbw_gbs$' ||
  { echo "FAIL: export tables' columns"; fails=$((fails + 1)); }
expect 2 "--window wants a number" "$bin" job "$tmp/ranks" --window 0
expect 1 "no rank could be used" "$bin" job "$tmp/nothing-here" --no-files
expect 2 "no input given" "$bin" job
expect 0 "ends of matched collectives" "$bin" job --help

# run/plot are handed to the Python package (found in the source tree).
expect 0 "program" "$bin" run --help

# Inputs with the same file name (one per rank) each keep their own report.
mkdir -p "$tmp/r0" "$tmp/r1"
cp "$tmp/l.gpuacct" "$tmp/r0/run.gpuacct"
cp "$tmp/c.gpuacct" "$tmp/r1/run.gpuacct"
expect 0 "run-2.report.json" "$bin" analyze "$tmp/r0/run.gpuacct" "$tmp/r1/run.gpuacct" --out "$tmp/o5"
grep -q '"bound": "launch"' "$tmp/o5/run.report.json" 2>/dev/null &&
  grep -q '"bound": "communication"' "$tmp/o5/run-2.report.json" 2>/dev/null ||
  { echo "FAIL: same-named inputs overwrote each other: $(ls "$tmp/o5")"; fails=$((fails + 1)); }

# Issue 8: profiler steps written touching (ts and dur in decimal us) stay two steps: the first
# ends at 1,001,001 ns, where the second begins (it used to end 1 ns later and be merged).
cat >"$tmp/touch.json" <<'EOF_TRACE'
{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0006, "dur": 1.0006},
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1001.0012, "dur": 1},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1000.1, "dur": 0.1, "args": {"correlation": 1}},
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1000.3, "dur": 0.5, "args": {"device": 0, "stream": 7, "correlation": 1}},
 {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1001.1, "dur": 0.1, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1001.3, "dur": 0.5, "args": {"device": 0, "stream": 7, "correlation": 2}}
]}
EOF_TRACE
expect 0 "gpuacct - 2 steps on 1 device" "$bin" analyze "$tmp/touch.json" --no-files

# Issue 8: a trace of another accelerator says what it holds, that it is not supported, and
# exits non-zero (the report is still written, verdict "none", reason "unsupported_device").
cat >"$tmp/mtia.json" <<'EOF_TRACE'
{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 1000},
 {"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 150, "dur": 5},
 {"ph": "X", "cat": "mtia_ccp_events", "name": "job", "pid": 2, "tid": 3, "ts": 160, "dur": 50},
 {"ph": "X", "cat": "mtia_ccp_events", "name": "job", "pid": 2, "tid": 3, "ts": 260, "dur": 50}
]}
EOF_TRACE
expect 1 "only events of another accelerator (mtia_ccp_events: 2, mtia_runtime: 1)" "$bin" analyze "$tmp/mtia.json" --out "$tmp/o6"
grep -q '"reason": "unsupported_device"' "$tmp/o6/mtia.report.json" 2>/dev/null ||
  { echo "FAIL: no report with reason unsupported_device for the MTIA trace"; fails=$((fails + 1)); }
if grep -q "warnings above" "$tmp/o6/mtia.report.json" 2>/dev/null; then
  echo "FAIL: the MTIA verdict points at warnings that were never printed"
  fails=$((fails + 1))
fi

# Golden: the sample's full report is exactly the reviewed one (scripts/update_goldens.sh).
"$bin" analyze "$root/examples/data/sample.gpuacct" --no-files --json |
  python3 "$root/scripts/normalize_report.py" - >"$tmp/sample.json"
if diff -u "$root/tests/golden/sample.report.json" "$tmp/sample.json" >"$tmp/golden.diff"; then
  pass=$((pass + 1))
else
  echo "FAIL: sample report differs from tests/golden/sample.report.json:"
  head -40 "$tmp/golden.diff"
  fails=$((fails + 1))
fi

# Several inputs read at once (--jobs) print and write what one at a time does, in the order
# given: two ranks (collectives by kernel order), a trace with collective args, a recording, a
# broken input between them, and two inputs with the same file name.
mkdir -p "$tmp/jobs1" "$tmp/jobs3" "$tmp/same"
cp "$root/examples/data/sample.gpuacct" "$tmp/same/sample.gpuacct"
printf '{"traceEvents": [' >"$tmp/jobs_broken.json"
abs_bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
abs_root="$(cd "$root" && pwd)"
jobs_inputs=("$abs_root/tests/data/kineto/sampled_rank-0.json.gz"
  "$abs_root/tests/data/kineto/nccl_data.json.gz" "$tmp/jobs_broken.json"
  "$abs_root/examples/data/sample.gpuacct" "$tmp/same/sample.gpuacct"
  "$abs_root/tests/data/kineto/sampled_rank-1.json.gz")
# Runs `gpuacct COMMAND --jobs J ARGS...` for J = 1 and 3, each in its own folder, into files
# named PREFIX*; passes if the exit status is WANT_RC, FILE (under jobs1) exists and is not
# empty, and both folders are identical.
same_at_jobs_1_and_3() {
  local prefix="$1" want_rc="$2" file="$3" command="$4"
  shift 4
  for j in 1 3; do
    (cd "$tmp/jobs$j" && "$abs_bin" "$command" --jobs "$j" "$@" >"${prefix}stdout" \
       2>"${prefix}stderr"; echo $? >"${prefix}rc")
  done
  if [ "$(cat "$tmp/jobs1/${prefix}rc")" = "$want_rc" ] && [ -s "$tmp/jobs1/$file" ] &&
     diff -r "$tmp/jobs1" "$tmp/jobs3" >"$tmp/jobs.diff"; then
    pass=$((pass + 1))
  else
    echo "FAIL: $command --jobs 3 differs from --jobs 1 (or the run did not do what it should):"
    cat "$tmp/jobs1/${prefix}rc"; head -5 "$tmp/jobs1/${prefix}stderr"; head -20 "$tmp/jobs.diff"
    fails=$((fails + 1))
  fi
}
same_at_jobs_1_and_3 "" 1 out/sample-2.report.json analyze -o out "${jobs_inputs[@]}"
[ -s "$tmp/jobs1/out/job.json" ] || { echo "FAIL: analyze of several ranks wrote no job.json"; fails=$((fails + 1)); }
# The same for `gpuacct job` over a directory of traces, each rank through the front door.
same_at_jobs_1_and_3 job_ 0 jout/job.json job -o jout "$abs_root/tests/data/kineto"
# An input in the output directory may be an earlier input's output: read one at a time.
(cd "$tmp/jobs1" && "$abs_bin" analyze --jobs 1 -o again "$abs_root/examples/data/sample.gpuacct" \
   again/sample.report.json >again_stdout1 2>&1; echo $? >>again_stdout1
 rm -rf again
 "$abs_bin" analyze --jobs 4 -o again "$abs_root/examples/data/sample.gpuacct" \
   again/sample.report.json >again_stdout4 2>&1; echo $? >>again_stdout4)
if [ "$(tail -1 "$tmp/jobs1/again_stdout1")" = 0 ] &&
   cmp -s "$tmp/jobs1/again_stdout1" "$tmp/jobs1/again_stdout4"; then
  pass=$((pass + 1))
else
  echo "FAIL: analyze --jobs 4 of an input and its own report differs from --jobs 1:"
  diff "$tmp/jobs1/again_stdout1" "$tmp/jobs1/again_stdout4" | head -10
  fails=$((fails + 1))
fi
expect 2 "--jobs wants a whole number from 1 to 256, not '0'" "$bin" analyze --jobs 0 x
expect 2 "--jobs wants a whole number from 1 to 256, not '-1'" "$bin" job -j -1 x
expect 2 "not '2x'" "$bin" analyze -j 2x x

echo "$pass passed, $fails failed"
[ "$fails" -eq 0 ]
