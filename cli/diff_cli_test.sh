#!/usr/bin/env bash
# `gpuacct diff` as CI uses it: exit codes (0 compared, 1 slower than --fail-if-slower, 2 usage
# or input error), one clear line for a bad input and no output file, a planted data-wall change
# found in the data wall, identical runs unchanged, every input kind through the front door.
# Usage: diff_cli_test.sh <gpuacct binary> <repo root>
set -u
bin="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=cli/cli_test_lib.sh
. "$(dirname "$0")/cli_test_lib.sh"

# Bad input: exit 2, one line on stderr naming the input, nothing on stdout, no -o file.
expect_bad_input() {
  local want_text="$1"
  shift
  local out err rc
  out="$("$bin" diff "$@" -o "$tmp/bad.json" 2>"$tmp/err")"
  rc=$?
  err="$(cat "$tmp/err")"
  if [ "$rc" -ne 2 ] || ! grep -qF -- "$want_text" <<<"$err" || [ -n "$out" ] ||
    [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -e "$tmp/bad.json" ]; then
    fail "diff $* -> rc=$rc (want 2), stdout '${out:0:80}', stderr: $err"
  else
    pass=$((pass + 1))
  fi
}

sample="$root/examples/data/sample.gpuacct"
expect 2 "needs two inputs" "$bin" diff
expect 2 "needs two inputs" "$bin" diff "$sample"
expect 2 "needs two inputs" "$bin" diff "$sample" "$sample" "$sample"
expect 2 "unknown option '--bogus'" "$bin" diff --bogus "$sample" "$sample"
expect 2 "is not a percentage" "$bin" diff --fail-if-slower abc "$sample" "$sample"
expect 2 "is not a percentage" "$bin" diff --fail-if-slower -3% "$sample" "$sample"
expect 2 "is not a number" "$bin" diff --resamples 0 "$sample" "$sample"
expect 2 "is not a whole number" "$bin" diff --warmup 1.5 "$sample" "$sample"
expect 0 "usage: gpuacct diff BASE NEW" "$bin" diff --help
expect 0 "exit status: 0 compared, 1 slower" "$bin" diff --help
expect 0 "how the step time changed" "$bin" --help

expect_bad_input "missing.gpuacct: no such file" "$tmp/missing.gpuacct" "$sample"
expect_bad_input "missing.gpuacct: no such file" "$sample" "$tmp/missing.gpuacct"
mkdir -p "$tmp/adir"
expect_bad_input "adir: no gpuacct report, step stream, recording or trace in it" "$sample" "$tmp/adir"
echo "not a run at all" >"$tmp/notes.txt"
expect_bad_input "notes.txt" "$sample" "$tmp/notes.txt"
printf '{"schema": "gpuacct.report/1", "steps": [' >"$tmp/cut.report.json"
expect_bad_input "cut.report.json: a gpuacct report that does not parse" "$tmp/cut.report.json" "$sample"
# A run whose steps are all warm-up has nothing to compare.
"$bin" synth --preset demo --steps 2 -o "$tmp/two.gpuacct" 2>/dev/null
expect_bad_input "two.gpuacct: no summary step to compare" "$sample" "$tmp/two.gpuacct"

# Planted: the same design and noise (seed 1, as the sample), each step waiting 3 ms longer for
# its input.  The data wall takes the change, within 1% of the step time, its interval covers
# 3 ms; nothing else moves; --fail-if-slower 5% fails (+12.8%), 20% does not.
"$bin" synth --preset demo --data-wait-ms 9 -o "$tmp/slower.gpuacct" 2>/dev/null
expect 1 "FAIL: --fail-if-slower 5%" "$bin" diff "$sample" "$tmp/slower.gpuacct" --fail-if-slower 5%
expect 0 "ok: --fail-if-slower 20%" "$bin" diff "$sample" "$tmp/slower.gpuacct" --fail-if-slower 20
expect 0 "of it data wall (+" "$bin" diff "$sample" "$tmp/slower.gpuacct"
"$bin" diff "$sample" "$tmp/slower.gpuacct" --fail-if-slower 5% -o "$tmp/planted.json" >/dev/null
[ $? -eq 1 ] || fail "planted diff with -o: exit status not 1"
python3 - "$tmp/planted.json" <<'EOF' || fail "planted diff JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == "gpuacct.diff/1", d["schema"]
step = d["step_time"]
data = d["walls"]["data"]
assert abs(data["delta_ms"] - 3.0) <= 0.01 * step["base_ms"], data
lo, hi = data["interval_ms"]
assert lo <= 3.0 <= hi, (lo, hi)
assert data["significant"] and step["significant"]
for name, w in d["walls"].items():
    assert name == "data" or not w["significant"], (name, w)
total = sum(w["delta_ms"] for w in d["walls"].values())
assert abs(total - step["delta_ms"]) < 1e-9, (total, step["delta_ms"])
assert d["fail_if_slower"] == {"percent": 5.0, "failed": True}, d["fail_if_slower"]
assert d["settings_differ"] == [], d["settings_differ"]
EOF
ls "$tmp" | grep -q '\.tmp\.' && fail "temporary file left: $(ls "$tmp")"

# Identical runs: no change, exit 0 even at 0%.
expect 0 "no significant change in step time" "$bin" diff "$sample" "$sample" --fail-if-slower 0%
# Another seed of the same design: noise, not a change.
"$bin" synth --preset demo --seed 3 -o "$tmp/noise.gpuacct" 2>/dev/null
expect 0 "no wall changed significantly" "$bin" diff "$sample" "$tmp/noise.gpuacct" --fail-if-slower 1%

# Every input kind through the front door: the report `analyze` writes of the sample compares
# equal to the sample itself (the same summary steps), and a report against a recording works.
"$bin" analyze "$sample" --out "$tmp/out" >/dev/null 2>&1
"$bin" diff "$tmp/out/sample.report.json" "$sample" --json >"$tmp/same.json"
python3 - "$tmp/same.json" <<'EOF' || fail "report vs its recording"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["step_time"]["delta_ms"] == 0, d["step_time"]
assert d["base"]["steps"] == d["new"]["steps"] == 22, (d["base"], d["new"])
assert d["kernels"]["known"], d["kernels"]
EOF
expect 1 "of it data wall" "$bin" diff "$tmp/out/sample.report.json" "$tmp/slower.gpuacct" --fail-if-slower 5%
# A rank's output folder is its report (analysis/job/rank_files.h); a folder of two ranks is
# not one run.
expect 1 "of it data wall" "$bin" diff "$tmp/out" "$tmp/slower.gpuacct" --fail-if-slower 5%
mkdir -p "$tmp/two_ranks"
cp "$tmp/out/sample.report.json" "$tmp/two_ranks/a.report.json"
cp "$tmp/out/sample.report.json" "$tmp/two_ranks/b.report.json"
expect_bad_input "two_ranks: holds the files of 2 ranks (a, b): name one of its files" \
  "$tmp/two_ranks" "$sample"
# Settings that differ are shown before the numbers.
"$bin" analyze "$sample" --warmup 4 --out "$tmp/out4" >/dev/null 2>&1
expect 0 "config.warmup_steps: 2 -> 4" "$bin" diff "$sample" "$tmp/out4/sample.report.json"
# --warmup applies to both, a report's rows re-flagged: the same steps, no setting differs.
out="$("$bin" diff "$tmp/out/sample.report.json" "$sample" --warmup 4 2>&1)"
{ grep -qF "20 steps compared (4 warm-up left out)" <<<"$out" &&
  ! grep -qF "settings that differ" <<<"$out"; } || fail "--warmup on a report and a recording: $out"
expect 0 "holds rows accounted already" "$bin" diff "$tmp/out/sample.report.json" "$sample" \
  --host-pause-us 50
# A step stream (rows, with the live run's warm-up flags, no kernels) made of the report's rows
# and a closing summary line: the same steps as the report, kernels not compared.
python3 - "$tmp/out/sample.report.json" "$tmp/sample.steps.jsonl" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
with open(sys.argv[2], "w") as out:
    out.write(json.dumps({"schema": "gpuacct.steps/1", "source": "injected", "hostname": "h",
                          "pid": 1, "rank": -1, "world_size": 0}) + "\n")
    for row in r["steps"]:
        out.write(json.dumps(row) + "\n")
    out.write(json.dumps({"summary": r["summary"], "verdict": r["verdict"], "provisional": False,
                          "step_rows": len(r["steps"]), "stats": []}) + "\n")
EOF
out="$("$bin" diff "$tmp/sample.steps.jsonl" "$tmp/out/sample.report.json" 2>&1)"
{ grep -qF "22 steps compared (2 warm-up left out)" <<<"$out" &&
  grep -qF "kernels: not compared (base: a step stream holds rows, not kernels)" <<<"$out" &&
  grep -qF "no significant change in step time (23.46 -> 23.46" <<<"$out"; } ||
  fail "step stream against its report: $out"
# Kineto traces (two ranks of one job): they differ in rank, said first.
expect 0 "rank: 0 -> 1" "$bin" diff "$root/tests/data/kineto/sampled_rank-0.json.gz" \
  "$root/tests/data/kineto/sampled_rank-1.json.gz"

echo "diff_cli_test: $pass passed, $fails failed"
[ "$fails" -eq 0 ]
