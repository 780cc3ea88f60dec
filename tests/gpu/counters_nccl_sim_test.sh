#!/usr/bin/env bash
# tests/gpu/counters_nccl.sh (the GPU check's NCCL and counters steps, issue 31) run end to end
# on the simulated device: stand-ins for its examples (CN_EXAMPLES) drive the simulated GPU --
# tensor_matmul / elementwise: the `counters` scenario with only its gemm (tensor pipes 80 %) /
# only its element-wise kernel (10 %); nccl_allreduce: one rank of job_driver on a single-rank
# communicator with a group of two send/receive pairs per step, printing the example's summary
# line -- with the library injected as on the GPU.  Asserts the rows the GPU run must show ok.
# usage: counters_nccl_sim_test.sh BUILD_DIR WORK_DIR
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(realpath "${1:?usage: counters_nccl_sim_test.sh BUILD_DIR WORK_DIR}")
WORK=$(realpath -m "${2:?}")/counters_nccl_sim
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$WORK"; mkdir -p "$WORK/examples"
SIM="$BUILD/sim"

for ex in tensor_matmul elementwise; do
  only=gemm; [ "$ex" = elementwise ] && only=elementwise
  cat >"$WORK/examples/$ex" <<SH
#!/usr/bin/env bash
# Stand-in for examples/$ex on the simulated device (counters_nccl_sim_test.sh).
exec env LD_LIBRARY_PATH="$SIM/lib" GPUACCT_SIM_SCENARIO_ONLY=$only GPUACCT_FLUSH_MS=20 \\
  "$SIM/bin/sim_scenario_counters" "\$@"
SH
done
cat >"$WORK/examples/nccl_allreduce" <<SH
#!/usr/bin/env bash
# Stand-in for examples/nccl_allreduce (counters_nccl_sim_test.sh): one rank, a single-rank
# communicator, per step 2 all-reduces (copies: NCCL's one-rank path) and a group of two
# send/receive pairs to itself; then the example's summary line.
steps=30
for a in "\$@"; do case "\$a" in --steps=*) steps=\${a#--steps=} ;; esac; done
env LD_LIBRARY_PATH="$SIM/lib" RANK=0 WORLD_SIZE=1 GPUACCT_SIM_NCCL_TRUTH="\$GPUACCT_OUTPUT_DIR/truth.jsonl" \\
  "$BUILD/tests/e2e/job_driver" --steps="\$steps" --p2p-pairs=2 --buckets=2 || exit \$?
echo "nccl_allreduce: nccl_version=22803 nranks=1 steps=\$steps allreduce_calls=\$((2 * steps)) p2p_calls=\$((4 * steps)) p2p_plans=2 expected_plugin_rows=\$((4 * steps))"
SH
ln -s "$BUILD/inject/libgpuacct_nccl_test_plugin_full.so" "$WORK/examples/nccl_test_plugin.so"
chmod +x "$WORK/examples"/*

start=$(date +%s)
out=$(CN_EXAMPLES="$WORK/examples" CN_OVERHEAD=0 "$HERE/counters_nccl.sh" "$BUILD" "$WORK/out" 2>&1)
rc=$?
echo "$out"
echo "ran in $(( $(date +%s) - start )) s, exit $rc"
# The stand-in job is data-bound (job_driver's 2 ms data wait), not the example's compute: the
# verdict row is the only one allowed to fail here.
[ "$(grep -cP '\tFAIL' "$WORK/out/rows.tsv")" = "$(grep -cP '^nccl: verdict\t.*\tFAIL' "$WORK/out/rows.tsv")" ] ||
  fail "rows other than the stand-in's verdict failed"
rows="$WORK/out/rows.tsv"
[ -s "$rows" ] || fail "no rows.tsv"
expect_ok() {  # check-name-prefix ...
  for name in "$@"; do
    line=$(grep -F "$name"$'\t' "$rows" | head -1)
    [ -n "$line" ] || fail "no row '$name'"
    [ "$(cut -f4 <<<"$line" | cut -c1-2)" = ok ] || fail "row '$name' not ok: $line"
  done
}
expect_ok "nccl: rows identity" "nccl: rows vs issued" "nccl: rows with GPU times" \
  "nccl: ops per kernel" "nccl: unmatched" "nccl: NCCL kernels" "forward: counting plugin" \
  "counters: tensor mm / ew" "counters: samples lost" \
  "counters tensor_matmul dev0: state" "counters tensor_matmul dev0: samples / due" \
  "counters tensor_matmul dev0: trigger set" "counters tensor_matmul dev0: sample clock" \
  "counters tensor_matmul dev0: start -> 1st sample" "counters elementwise dev0: samples / due"
grep -qP '^nccl: ops per kernel\t>= 1 each\t2x80\t' "$rows" || fail "not every row of a 2-operation kernel"
# One of the first five samples holds the planted plateau (the ones before the first kernel
# read 0: on a loaded machine the example's first launch comes a few ms after sampling starts).
grep -qP '^counters tensor_matmul dev0: sample [0-4] values\t-\t.*realtime=80.00' "$rows" ||
  fail "tensor_matmul's raw values not as planted"
[ -s "$WORK/out/counters_tensor_matmul/diagnostics.tsv" ] || fail "no diagnostics side file"
echo "counters_nccl.sh on the simulated device: ok"
