#!/usr/bin/env bash
# Test of tests/gpu/counters_check.py (check.sh's hardware-counters diagnostics) on a report from
# the simulated device (counters_check_fixture/): every judged row ok there; copies with the H200
# run's shape (2 samples of ~150 due, no consistent clock) and without the debug object fail
# exactly those rows; a run that left nothing fails.
# usage: counters_check_test.sh WORK_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: counters_check_test.sh WORK_DIR}
CHECK="$HERE/counters_check.py"
fail() { echo "FAIL: $*"; exit 1; }

good=$(python3 "$CHECK" tensor_matmul "$HERE/counters_check_fixture")
echo "$good"
! grep -q FAIL <<<"$good" || fail "a FAIL row on the good fixture"
for row in "state" "samples / due" "trigger set" "sample clock" "set-up (ms to start)" \
           "sample 2 raw (ms)" "sample 4 values" "start -> 1st sample"; do
  grep -qF "counters tensor_matmul dev0: $row"$'\t' <<<"$good" || fail "no '$row' row"
done
grep -q $'sample 3 values\t-\t.*sm__pipe_tensor_cycles_active_realtime=80.00' <<<"$good" ||
  fail "sample 3's planted tensor value not shown"

bad="$WORK/counters_check_bad"
rm -rf "$bad"; mkdir -p "$bad"
python3 - "$HERE/counters_check_fixture/gpuacct_x.json" "$bad/gpuacct_x.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["collection"]["counters"]["devices"][0]
d["samples"], d["samples_due"] = 2, 150           # the H200's 2 samples over ~150 ms
d["clock"] = "inconsistent"
d["debug"]["start_to_first_sample_ns"] = -743097609
d["clock_offset_ns"] = 0
json.dump(r, open(sys.argv[2], "w"))
PY
out=$(python3 "$CHECK" tensor_matmul "$bad")
echo "$out"
grep -q $'samples / due\t>= 90%\t2 / 150 (1%)\tFAIL' <<<"$out" || fail "too few samples not caught"
grep -q $'sample clock\t.*\tFAIL' <<<"$out" || fail "an inconsistent clock not caught"
grep -q $'start -> 1st sample\t.*\tFAIL' <<<"$out" || fail "a first sample far from the start not caught"
[ "$(grep -c FAIL <<<"$out")" -eq 3 ] || fail "want exactly 3 FAIL rows"

nodebug="$WORK/counters_check_nodebug"
rm -rf "$nodebug"; mkdir -p "$nodebug"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); [d.pop('debug') for d in r['collection']['counters']['devices']]; json.dump(r, open(sys.argv[2],'w'))" \
  "$HERE/counters_check_fixture/gpuacct_x.json" "$nodebug/gpuacct_x.json"
grep -q $'debug\tpresent\tabsent\tFAIL' <<<"$(python3 "$CHECK" tensor_matmul "$nodebug")" ||
  fail "a report without the debug object not caught"

empty="$WORK/counters_check_empty"
rm -rf "$empty"; mkdir -p "$empty"
grep -q $'\tFAIL' <<<"$(python3 "$CHECK" elementwise "$empty")" || fail "empty run dir not caught"
echo "counters_check.py: ok"
