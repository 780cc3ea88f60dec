#!/usr/bin/env bash
# The NCCL-plugin and hardware-counters steps of tests/gpu/check.sh (its sections 2b and 3c),
# runnable alone on prebuilt binaries (issue 31):
#
#   tests/gpu/counters_nccl.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR holds inject/libgpuacct.so and the examples check.sh builds (examples/nccl_allreduce,
# examples/nccl_test_plugin.so, examples/tensor_matmul, examples/elementwise); nothing is built.
# Everything goes under OUT_DIR: nccl_plugin/, nccl_forward/, counters_<example>/ (report,
# stdout, stderr, diagnostics.tsv), overhead/, and rows.tsv (the table's rows, tab-separated).
# Prints the table last; exit status 0 when no row failed.  GPU time: ~60 s on one GPU (NCCL
# ~15 s, the two counter diagnostic runs ~10 s, the counters' overhead 2 examples x 2 settings
# x 3 runs ~35 s; CN_OVERHEAD=0 skips the last).
#
# check.sh sources this file and calls nccl_section / counters_section with its own row()
# and FAILS (one implementation).  CN_EXAMPLES=DIR takes the example binaries from DIR instead
# of BUILD_DIR/examples (tests/gpu/counters_nccl_sim_test.sh runs this on the simulated device
# with stand-ins there).

# One NCCL run: the example with the library, then nccl_check.py's rows.
cn_nccl_run() {  # mode dir steps env...
  local mode=$1 dir=$2 steps=$3 check expected got result rc loaded
  shift 3
  rm -rf "$dir"; mkdir -p "$dir"
  env -u NCCL_PROFILER_PLUGIN -u GPUACCT_NCCL_PROFILER_NEXT "$@" CUDA_INJECTION64_PATH="$CN_LIB" \
    GPUACCT_OUTPUT_DIR="$dir" GPUACCT_QUIET=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL \
    NCCL_DEBUG_FILE="$dir/nccl_debug.%p" timeout 60 "$CN_EXAMPLES/nccl_allreduce" --marks=capi \
    --steps="$steps" >"$dir/stdout" 2>"$dir/stderr"
  rc=$?
  if [ $rc -ne 0 ]; then
    row "nccl $mode: exit status" 0 "$rc" "FAIL: $(grep -v '^gpuacct_test_plugin' "$dir/stderr" | head -1 | cut -c1-70)"
    FAILS=$((FAILS + 1))
  fi
  while IFS=$'\t' read -r check expected got result; do
    row "$check" "$expected" "$got" "$result"
    case "$result" in FAIL*) FAILS=$((FAILS + 1)) ;; esac
  done < <(python3 "$CN_ROOT/tests/gpu/nccl_check.py" "$mode" "$dir")
  loaded=$(grep -hi profiler "$dir"/nccl_debug.* 2>/dev/null | sed 's/.*NCCL INFO //' |
           awk 'NR == 1 { first = $0 } tolower($0) ~ /load/ { print; found = 1; exit }
                END { if (!found) print first }' | cut -c1-80)
  row "nccl $mode: NCCL's log" "-" "-" "${loaded:-no profiler line in NCCL_DEBUG=INFO}"
}

# NCCL profiler plugin (one GPU, single-rank communicator).  NCCL gives a single-rank
# all-reduce no task, so no profiler event (examples/nccl_allreduce.cu): the plugin rows
# expected are the example's send/receive pairs to itself, each row timed, kernel_ops per
# SendRecv kernel.  ~10-20 s of GPU time.
nccl_section() {  # out_dir
  echo "== NCCL profiler plugin (nccl_allreduce)"
  if [ ! -x "$CN_EXAMPLES/nccl_allreduce" ]; then
    row "nccl plugin" "-" "-" "skipped: nccl_allreduce not built (no nccl.h, see nvcc.log)"
    return
  fi
  cn_nccl_run plugin "$1/nccl_plugin" 20
  if [ -f "$CN_EXAMPLES/nccl_test_plugin.so" ]; then
    cn_nccl_run forward "$1/nccl_forward" 5 NCCL_PROFILER_PLUGIN="$CN_EXAMPLES/nccl_test_plugin.so" \
      GPUACCT_TEST_PLUGIN_P2P=1 GPUACCT_TEST_PLUGIN_PRINT=1
  else
    row "nccl forward" "-" "-" "FAIL: nccl_test_plugin.so not built"; FAILS=$((FAILS + 1))
  fi
}

cn_counters_of() {  # report dir -> "state tensor_pct dram_pct samples_lost metrics"
  python3 - "$1" <<'PY'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/gpuacct_*.json"))
if not files:
    print("no-report nan nan 0 -"); sys.exit()
r = json.load(open(files[-1]))
c = r.get("collection", {}).get("counters", {})
state = c.get("state", "absent")
t = (r.get("summary", {}).get("counters") or {}).get("compute_time", {})
lost = sum(s["value"] for s in r["stats"]
           if s["name"] in ("counter_samples_lost", "late_counter_samples_dropped"))
pct = lambda k: "nan" if t.get(k) is None else f"{t[k]:.1f}"
# The hardware metric each role got on this chip (the names only a GPU can confirm).
devs = c.get("devices") or [{}]
metrics = ",".join(m.split(".")[0] for m in devs[0].get("metrics", [])) or "-"
print(state, pct("tensor_active_pct"), pct("dram_pct"), lost, metrics)
PY
}

cn_counters_run() {  # example out_dir -> cn_counters_of's line (report in out_dir/counters_<example>)
  local dir="$2/counters_$1"
  rm -rf "$dir"; mkdir -p "$dir"
  CUDA_INJECTION64_PATH="$CN_LIB" GPUACCT_OUTPUT_DIR="$dir" GPUACCT_QUIET=1 GPUACCT_COUNTERS=1 GPUACCT_COUNTERS_EXPERIMENTAL=1 \
    GPUACCT_COUNTERS_DEBUG=1 timeout 120 "$CN_EXAMPLES/$1" --marks=capi --steps=30 \
    >"$dir/stdout" 2>"$dir/stderr"
  cn_counters_of "$dir"
}

cn_counters_diagnostics() {  # example out_dir: counters_check.py's rows per device
  local check expected got result
  while IFS=$'\t' read -r check expected got result; do
    row "$check" "$expected" "$got" "$result"
    case "$result" in FAIL*) FAILS=$((FAILS + 1)) ;; esac
  done < <(python3 "$CN_ROOT/tests/gpu/counters_check.py" "$1" "$2/counters_$1" |
           tee "$2/counters_$1/diagnostics.tsv")
}

cn_ms_per_step() {  # example env... -> median ms/step over 3 runs
  local ex=$1 vals=() v
  shift
  for _ in 1 2 3; do
    v=$(env "$@" "$CN_EXAMPLES/$ex" --marks=capi --steps=30 2>/dev/null |
        sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
    vals+=("${v:-nan}")
  done
  printf '%s\n' "${vals[@]}" | sort -g | sed -n 2p
}

cn_ratio() {
  python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}')" "$1" "$2" 2>/dev/null || echo nan
}

# Hardware counters (GPUACCT_COUNTERS=1, docs/counters.md): the tensor-core matmul must keep
# the tensor pipes far busier than the element-wise example; per device the raw sampling
# diagnostics (GPUACCT_COUNTERS_DEBUG=1: docs/counters.md, "GPU diagnostics"); then the overhead
# of GPUACCT_COUNTERS=1 against the library without it (median of 3 runs each).
counters_section() {  # out_dir
  local out=$1 mm_state mm_tensor mm_dram mm_lost mm_metrics ew_state ew_tensor ew_dram ew_lost
  local verdict lost_status why ex on off
  echo "== hardware counters (tensor_matmul vs elementwise)"
  read -r mm_state mm_tensor mm_dram mm_lost mm_metrics < <(cn_counters_run tensor_matmul "$out")
  read -r ew_state ew_tensor ew_dram ew_lost _ < <(cn_counters_run elementwise "$out")
  row "counters: metrics chosen" "5 roles" "$(echo "$mm_metrics" | tr ',' '\n' | grep -c .)" "$mm_metrics"
  echo "counters: metrics chosen: $mm_metrics"
  if [ "$mm_state" != active ] || [ "$ew_state" != active ]; then
    why=$(grep -h "hardware counters off" "$out"/counters_*/stderr | head -1 | cut -c1-100)
    row "counters: state" active "$mm_state/$ew_state" "FAIL: ${why:-see $out/counters_*}"
    FAILS=$((FAILS + 1))
  else
    verdict=$(python3 -c "import sys; m, e = float(sys.argv[1]), float(sys.argv[2]); print('ok' if m >= 30 and m >= e + 20 else 'FAIL')" "$mm_tensor" "$ew_tensor" 2>/dev/null || echo FAIL)
    [ "$verdict" = ok ] || FAILS=$((FAILS + 1))
    row "counters: tensor mm / ew" ">=30%, +20 pp" "${mm_tensor}% / ${ew_tensor}%" "$verdict (DRAM ${mm_dram}% / ${ew_dram}%)"
    lost_status=ok
    if [ "$mm_lost" != 0 ] || [ "$ew_lost" != 0 ]; then lost_status=FAIL; FAILS=$((FAILS + 1)); fi
    row "counters: samples lost" "0 / 0" "$mm_lost / $ew_lost" "$lost_status"
  fi
  cn_counters_diagnostics tensor_matmul "$out"
  cn_counters_diagnostics elementwise "$out"
  [ "${CN_OVERHEAD:-1}" = 0 ] && return
  for ex in tensor_matmul launch_bound; do
    [ -x "$CN_EXAMPLES/$ex" ] || continue
    off=$(cn_ms_per_step "$ex" CUDA_INJECTION64_PATH="$CN_LIB" GPUACCT_OUTPUT_DIR="$out/overhead" GPUACCT_QUIET=1)
    on=$(cn_ms_per_step "$ex" CUDA_INJECTION64_PATH="$CN_LIB" GPUACCT_OUTPUT_DIR="$out/overhead" GPUACCT_QUIET=1 GPUACCT_COUNTERS=1 GPUACCT_COUNTERS_EXPERIMENTAL=1)
    row "overhead: counters $ex" "<= 1.03" "${on} ms/step" "x$(cn_ratio "$on" "$off") vs library without counters (${off} ms/step)"
  done
}

# Set by the caller (check.sh) or by main: the checkout, the library, the examples.
cn_setup() {  # build_dir
  CN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  CN_LIB="$1/inject/libgpuacct.so"
  CN_EXAMPLES=${CN_EXAMPLES:-$1/examples}
}

cn_main() {
  set -uo pipefail
  if [ $# -ne 2 ]; then
    echo "usage: counters_nccl.sh BUILD_DIR OUT_DIR" >&2
    return 2
  fi
  local b out start
  b=$(realpath -m "$1"); out=$(realpath -m "$2")
  mkdir -p "$out"
  cn_setup "$b"
  if [ ! -f "$CN_LIB" ]; then
    echo "counters_nccl.sh: no $CN_LIB (build it first: check.sh, or scripts/build.sh --main)" >&2
    return 2
  fi
  ROWS=()
  FAILS=0
  row() { ROWS+=("$(printf '%-28s %-14s %-14s %s' "$1" "$2" "$3" "$4")"); printf '%s\t%s\t%s\t%s\n' "$@" >>"$out/rows.tsv"; }
  : >"$out/rows.tsv"
  start=$(date +%s)
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  nccl_section "$out"
  counters_section "$out"
  echo
  echo "gpuacct counters + NCCL check ($(( $(date +%s) - start )) s, outputs in $out)"
  printf '%-28s %-14s %-14s %s\n' "check" "expected" "got" "result"
  printf '%s\n' "${ROWS[@]}"
  return $(( FAILS > 0 ))
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  cn_main "$@"
  exit $?
fi
