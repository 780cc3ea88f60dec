#!/usr/bin/env bash
# Test of tests/gpu/nccl_check.py (check.sh's NCCL plugin rows) on a hand-written run directory
# (nccl_check_fixture/): every row ok there; a copy with an all-reduce row and a row without GPU
# times fails exactly those rows; a run that left nothing fails.
# usage: nccl_check_test.sh WORK_DIR
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${1:?usage: nccl_check_test.sh WORK_DIR}
CHECK="$HERE/nccl_check.py"
fail() { echo "FAIL: $*"; exit 1; }

good=$(python3 "$CHECK" plugin "$HERE/nccl_check_fixture")
echo "$good"
[ "$(grep -c . <<<"$good")" -eq 10 ] || fail "plugin mode: want 10 rows"
! grep -q FAIL <<<"$good" || fail "plugin mode: a FAIL row on the good fixture"
fwd=$(python3 "$CHECK" forward "$HERE/nccl_check_fixture")
grep -q $'^forward: counting plugin\t.*\tok$' <<<"$fwd" || fail "forward mode: counting plugin row"
! grep -q FAIL <<<"$fwd" || fail "forward mode: a FAIL row on the good fixture"

bad="$WORK/nccl_check_bad"
rm -rf "$bad"; mkdir -p "$bad"; cp "$HERE"/nccl_check_fixture/* "$bad/"
# An AllReduce row (single-rank all-reduces must not reach the plugin) and one row untimed.
sed -i -e 's/^1,\(.*\),8,SendRecv,/1,\1,8,AllReduce,/' -e 's/^0,\(.*\),200,302,nccl_plugin,2$/0,\1,0,0,nccl_plugin,2/' \
  "$bad/gpuacct_x.collectives.csv"
out=$(python3 "$CHECK" plugin "$bad")
echo "$out"
grep -q $'^nccl: rows vs issued\t.*\tFAIL: single-rank all-reduces' <<<"$out" || fail "AllReduce row not caught"
grep -q $'^nccl: rows with GPU times\t8\t7 .*\tFAIL' <<<"$out" || fail "untimed row not caught"
[ "$(grep -c FAIL <<<"$out")" -eq 2 ] || fail "want exactly 2 FAIL rows"

# What the H200 run of 2026-12-04 gave: the mangled SendRecv kernel taken for compute, every
# record unmatched, no kernel_ops column.
h200="$WORK/nccl_check_h200"
rm -rf "$h200"; mkdir -p "$h200"; cp "$HERE"/nccl_check_fixture/* "$h200/"
sed -i -e 's/"communication": true/"communication": false/' -e 's/"value": 0/"value": 8/' \
  "$h200/gpuacct_x.json"
sed -i -e 's/,kernel_ops$//' -e 's/,nccl_plugin,2$/,nccl_plugin/' "$h200/gpuacct_x.collectives.csv"
out=$(python3 "$CHECK" plugin "$h200")
echo "$out"
grep -q $'^nccl: unmatched\t0\t8\tFAIL' <<<"$out" || fail "unmatched records not caught"
grep -q $'^nccl: NCCL kernels\t.*\tFAIL' <<<"$out" || fail "an NCCL kernel taken for compute not caught"
grep -q $'^nccl: ops per kernel\t.*no kernel_ops column\tFAIL' <<<"$out" || fail "no kernel_ops not caught"

empty="$WORK/nccl_check_empty"
rm -rf "$empty"; mkdir -p "$empty"
grep -q $'\tFAIL' <<<"$(python3 "$CHECK" plugin "$empty")" || fail "empty run dir not caught"
echo "nccl_check.py: ok"
