#!/usr/bin/env bash
# GPU check of libgpuacct.so on a machine with an NVIDIA GPU (Hopper: sm_90 build).
#
#  1. builds libgpuacct.so (Release), the CUDA examples and the bare CUPTI tracer;
#  2. runs every example under the library (C API marks and no marks), checks each verdict,
#     and prints its launch callbacks per CUPTI domain (2a: do runtime launches reach the
#     driver's callbacks?);
#  2a'. runs examples/queued_ahead (no synchronize between steps): nothing dropped as late while
#      CUPTI holds a buffer with a kernel still queued (docs/injection.md, "What CUPTI may do");
#  3. measures overhead on the launch-bound example: time per step with the library divided by
#     time without it, and divided by the bare CUPTI-only tracer (the floor any tracer pays);
#  3b. runs examples/nccl_allreduce under the library as NCCL's profiler plugin (one GPU: a
#      single-rank communicator), then once more with a counting plugin forwarded to;
#  3c. hardware counters (GPUACCT_COUNTERS=1): tensor-pipe activity of a tensor-core matmul
#      well above an element-wise example's, no sample lost, per device the raw sampling
#      diagnostics (GPUACCT_COUNTERS_DEBUG=1, counters_check.py: samples against due, trigger
#      and interval set, the samples' clock, the first samples' raw times and values, start to
#      first sample), and the overhead of the setting (~40 s of GPU time in all);
#  4. optionally runs examples/train.py (PyTorch) per wall when torch with CUDA is importable;
#  5. prints one table last.  Exit status: 0 when every verdict matched.
#
# Budget: < 8 minutes on one GPU (build ~1-2 min with 16 cores, runs ~1 min; the PyTorch loops
# ~3 min).
# Usage: tests/gpu/check.sh [BUILD_DIR]     (default build-gpu)
#   GPUACCT_CHECK_PREBUILT=1    use the binaries already in BUILD_DIR (built elsewhere and carried:
#                               libgpuacct.so, bin/gpuacct, examples/, bare_cupti_tracer.so)
#   GPUACCT_CHECK_SECTIONS="loops examples held nccl overhead counters"   the sections to run
#                               (default: all), in the file's order
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$(realpath -m "${1:-$ROOT/build-gpu}")
OUT="$B/gpu_check"
mkdir -p "$OUT"
JOBS=$(nproc 2>/dev/null || echo 4)
START=$(date +%s)
declare -a ROWS=()
FAILS=0
row() { ROWS+=("$(printf '%-28s %-14s %-14s %s' "$1" "$2" "$3" "$4")"); }
want() { case " ${GPUACCT_CHECK_SECTIONS:-all} " in *" all "* | *" $1 "*) return 0 ;; esac; return 1; }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "GPUs: $NGPU"

# ---- 1. build --------------------------------------------------------------------------------
echo "== build ($B)"
# Build-time packages carried from the dev VM (tests/gpu/fetch_device_deps.sh), for images
# without apt access: unpacked into the build directory, found through CMAKE_PREFIX_PATH.
EXTRA_CMAKE=()
if compgen -G "$ROOT/.device-deps/*.deb" >/dev/null; then
  DEPS="$B/deps"
  mkdir -p "$DEPS"
  for deb in "$ROOT"/.device-deps/*.deb; do
    if command -v dpkg >/dev/null; then dpkg -x "$deb" "$DEPS"; else
      (cd "$DEPS" && ar p "$deb" data.tar.xz 2>/dev/null | tar xJ 2>/dev/null || ar p "$deb" data.tar.zst | tar --zstd -x); fi
  done
  export PATH="$DEPS/usr/bin:$PATH"
  export PKG_CONFIG_PATH="$DEPS/usr/lib/x86_64-linux-gnu/pkgconfig:$DEPS/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export PKG_CONFIG_SYSROOT_DIR="$DEPS"
  export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  EXTRA_CMAKE=(-DCMAKE_PREFIX_PATH="$DEPS/usr" -DZLIB_ROOT="$DEPS/usr")
  echo "using carried packages from .device-deps"
fi
LIB="$B/inject/libgpuacct.so"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
if [ "${GPUACCT_CHECK_PREBUILT:-0}" = 1 ] && [ -f "$LIB" ] && [ -x "$B/bin/gpuacct" ]; then
  echo "prebuilt binaries in $B (build skipped)"
else
  if ! cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DGPUACCT_BUILD_TESTS=OFF \
       -DGPUACCT_BUILD_BENCH=OFF "${EXTRA_CMAKE[@]}" >"$OUT/cmake.log" 2>&1; then
    tail -20 "$OUT/cmake.log"; echo "cmake failed (missing nlohmann-json3-dev, libunwind-dev, zlib?)"; exit 1
  fi
  cmake --build "$B" -j"$JOBS" --target gpuacct gpuacct_cli >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  "$ROOT/tests/gpu/compile_examples.sh" nvcc "$B/examples" >"$OUT/nvcc.log" 2>&1 || { cat "$OUT/nvcc.log"; exit 1; }
  g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -I"$CUDA_HOME/include" -I"$ROOT" \
    "$ROOT/tests/gpu/bare_cupti_tracer.cc" "$ROOT/cupti_hooks/api_table.cc" -o "$B/bare_cupti_tracer.so" -L"$CUDA_HOME/lib64" -lcupti -Wl,-rpath,"$CUDA_HOME/lib64" \
    >"$OUT/bare.log" 2>&1 || { cat "$OUT/bare.log"; exit 1; }
fi
echo "build done in $(( $(date +%s) - START )) s"

verdict_of() {  # report dir -> "bound steps"
  python3 - "$1" <<'PY'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/gpuacct_*.json"))
if not files:
    print("no-report 0"); sys.exit()
r = json.load(open(files[-1]))
print(r["verdict"]["bound"], r["summary"]["steps"] + r["summary"]["warmup_steps"])
PY
}

run_example() {  # name marks expected
  local name=$1 marks=$2 want=$3 dir="$OUT/$1_$2"
  rm -rf "$dir"; mkdir -p "$dir"
  CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$dir" GPUACCT_QUIET=1 \
    timeout 120 "$B/examples/$name" --marks="$marks" >"$dir/stdout" 2>"$dir/stderr"
  local rc=$?
  read -r got steps < <(verdict_of "$dir")
  local status=ok
  if [ $rc -ne 0 ] || [ "$got" != "$want" ]; then status="FAIL(rc=$rc)"; FAILS=$((FAILS + 1)); fi
  row "$name --marks=$marks" "$want" "$got" "$status, $steps steps"
}

# ---- 2. verdicts -------------------------------------------------------------------------------
if want examples; then
echo "== examples"
for marks in capi none; do
  run_example data_bound "$marks" data
  run_example launch_bound "$marks" launch
  run_example compute_bound "$marks" compute
  if [ "$NGPU" -ge 2 ]; then
    run_example comm_bound "$marks" communication
  else
    row "comm_bound --marks=$marks" communication "-" "skipped: needs >= 2 GPUs"
  fi
done

# ---- 2a. launch callbacks per CUPTI domain (docs/overhead.md, "Fewer callbacks") -------------
# Does every runtime launch reach the driver-domain launch callbacks?  If the nested count equals
# the runtime count on every example (and train.py), the runtime launch callbacks could go.
# Information, not a pass/fail: nothing decides the answer before a GPU has given it.
callbacks_of() {  # report dir -> "runtime driver nested"
  python3 - "$1" <<'PY'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/gpuacct_*.json"))
if not files:
    print("- - -"); sys.exit()
stats = {s["name"]: s["value"] for s in json.load(open(files[-1]))["stats"]}
print(*(stats.get("launch_callbacks_" + k, "-") for k in ("runtime", "driver", "driver_nested")))
PY
}
callbacks_row() {  # label report-dir
  read -r rt drv nested < <(callbacks_of "$2")
  local all=no
  [ "$rt" != "-" ] && [ "$rt" -gt 0 ] && [ "$nested" = "$rt" ] && all=yes
  # Since issue 28 the library subscribes launches in the driver domain alone (the answer of
  # this row on an H200): no runtime callback to nest in.  The overhead matrix's cb_both row
  # (tests/gpu/overhead_matrix.py) counts both domains.
  [ "$rt" = 0 ] && [ "$drv" != "-" ] && [ "$drv" -gt 0 ] && all="n/a (driver domain only)"
  row "callbacks: $1" "-" "rt $rt drv $drv" "nested $nested; every runtime launch reached the driver: $all"
}
for name in data_bound launch_bound compute_bound; do callbacks_row "$name" "$OUT/${name}_capi"; done

fi  # examples

# ---- 2a'. held buffers (docs/injection.md, "What CUPTI may do", items 1 and 2) -----------------
if want held; then
# A loop that never lets the GPU queue drain between synchronizes: does CUPTI hold its records
# (API records too) until a buffer fills or the queue drains, and does the watermark wait for
# them?  Pass: verdict compute, nothing dropped as late.  Information: how late records came
# (the report's delivery section) and GPU records CUPTI could not time (cupti_records_untimed).
held_of() {  # report dir -> "bound late_ops late_host untimed lag_max_ms held_peak"
  python3 - "$1" <<'PY'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/gpuacct_*.json"))
if not files:
    print("no-report - - - - -"); sys.exit()
r = json.load(open(files[-1]))
st = {s["name"]: s["value"] for s in r["stats"]}
d = r.get("delivery", {})
print(r["verdict"]["bound"], st.get("late_gpu_ops_dropped", "-"), st.get("late_host_events_dropped", "-"),
      st.get("cupti_records_untimed", "-"), round(d.get("lag_max_ns", 0) / 1e6, 1), d.get("held_events_peak", "-"))
PY
}
HELD_DIR="$OUT/queued_ahead_capi"
rm -rf "$HELD_DIR"; mkdir -p "$HELD_DIR"
CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$HELD_DIR" GPUACCT_QUIET=1 GPUACCT_FLUSH_MS=20 \
  timeout 120 "$B/examples/queued_ahead" --marks=capi >"$HELD_DIR/stdout" 2>"$HELD_DIR/stderr"
HELD_RC=$?
read -r hbound hlate_ops hlate_host huntimed hlag hpeak < <(held_of "$HELD_DIR")
hstatus=ok
if [ $HELD_RC -ne 0 ] || [ "$hbound" != compute ] || [ "$hlate_ops" != 0 ] || [ "$hlate_host" != 0 ]; then
  hstatus="FAIL(rc=$HELD_RC)"; FAILS=$((FAILS + 1))
fi
row "held buffers: queued_ahead" "compute, 0 late" "$hbound, $hlate_ops/$hlate_host late" \
  "$hstatus; records up to ${hlag} ms behind the watermark, ${hpeak} events held, untimed $huntimed"

fi  # held

# ---- 2b. NCCL profiler plugin (one GPU, single-rank communicator) -----------------------------
if want nccl; then
# tests/gpu/counters_nccl.sh (also runnable alone, issue 31): the rows of nccl_check.py.
CN_EXAMPLES="$B/examples"
source "$ROOT/tests/gpu/counters_nccl.sh"
cn_setup "$B"
nccl_section "$OUT"

fi  # nccl

# ---- 3. overhead -------------------------------------------------------------------------------
if want overhead; then
# Steps marked through the C API in every row: GPUACCT_SAMPLE switches CUPTI at C API step marks
# (docs/overhead.md), and the rows differ only in the tracer.  The full matrix (each CUPTI
# feature alone, the PyTorch loops, torch.profiler) is tests/gpu/overhead_matrix.py.
echo "== overhead (launch_bound, 3 runs each, median ms/step)"
ms_per_step() {  # env... -> median ms/step over 3 runs
  local vals=()
  for _ in 1 2 3; do
    v=$(env "$@" "$B/examples/launch_bound" --marks=capi --steps=40 2>/dev/null |
        sed -n 's/.*steps in [0-9.]* ms, \([0-9.]*\) ms\/step.*/\1/p')
    vals+=("${v:-nan}")
  done
  printf '%s\n' "${vals[@]}" | sort -g | sed -n 2p
}
BASE=$(ms_per_step GPUACCT_UNUSED=1)
BARE=$(ms_per_step CUDA_INJECTION64_PATH="$B/bare_cupti_tracer.so")
WITH=$(ms_per_step CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$OUT/overhead" GPUACCT_QUIET=1)
# What the library asked of CUPTI before issue 28 (its design: docs/overhead.md).
BEFORE=$(ms_per_step CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$OUT/overhead" GPUACCT_QUIET=1 \
  GPUACCT_CUPTI_KINDS=kernel,copy,memset,sync GPUACCT_CUPTI_CALLBACKS=both GPUACCT_CUPTI_TIMESTAMPS=callback \
  GPUACCT_CUPTI_API=records)
WITH_NOSTACK=$(ms_per_step CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$OUT/overhead" GPUACCT_QUIET=1 GPUACCT_STACKS=0)
WITH_SAMPLED=$(ms_per_step CUDA_INJECTION64_PATH="$LIB" GPUACCT_OUTPUT_DIR="$OUT/overhead" GPUACCT_QUIET=1 GPUACCT_SAMPLE=10)
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.3f}')" "$1" "$2" 2>/dev/null || echo nan; }
row "overhead: no tracer" "-" "${BASE} ms/step" "baseline"
row "overhead: bare CUPTI tracer" "-" "${BARE} ms/step" "x$(ratio "$BARE" "$BASE") vs baseline"
row "overhead: libgpuacct" "-" "${WITH} ms/step" "x$(ratio "$WITH" "$BASE") vs baseline, x$(ratio "$WITH" "$BARE") vs bare"
row "overhead: before issue 28" "-" "${BEFORE} ms/step" "x$(ratio "$BEFORE" "$BASE") vs baseline (today's set of 2026-12-04)"
row "overhead: libgpuacct STACKS=0" "-" "${WITH_NOSTACK} ms/step" "x$(ratio "$WITH_NOSTACK" "$BASE") vs baseline, x$(ratio "$WITH_NOSTACK" "$BARE") vs bare"
row "overhead: libgpuacct SAMPLE=10" "-" "${WITH_SAMPLED} ms/step" "x$(ratio "$WITH_SAMPLED" "$BASE") vs baseline (target <= 1.03)"

fi  # overhead

# ---- 3c. hardware counters (GPUACCT_COUNTERS=1, docs/counters.md) ----------------------------
if want counters; then
# tests/gpu/counters_nccl.sh: tensor matmul vs element-wise, the per-device sampling
# diagnostics (counters_check.py), the overhead of GPUACCT_COUNTERS=1.  ~45 s of GPU time.
CN_EXAMPLES="$B/examples"
source "$ROOT/tests/gpu/counters_nccl.sh"
cn_setup "$B"
counters_section "$OUT"

fi  # counters

# ---- 4. PyTorch loops: the README's one-liner exactly as typed ---------------------------------
if want loops; then
# Only CUDA_INJECTION64_PATH set: no PYTHONPATH, no pip install, started from a directory of its
# own.  The library's own Python instrumentation must load (collection.python "embedded"); with
# GPUACCT_PYTHON=0 the steps are detected.  Each loop (tests/gpu/loops.py) is timed by its own
# clock and recorded; loop_check.py compares the rows with the clock and replays the recording.
# GPUACCT_CHECK_LOOPS picks the scenarios (default: all below).  The CUDA-graph loop is not
# launch-bound once its nodes are traced as one span (issue 28: 1.12x no tracer on the H200):
# forward and backward are two graph launches, and what the GPU waits for is the host's
# .item() turnaround and the optimizer's Python -- the other wall (16 % on the H200, compute 81 %).
loop_run() {  # scenario expected marks
  local s=$1 want=$2 marks=$3 dir="$OUT/loop_$1_$3" extra=()
  rm -rf "$dir"; mkdir -p "$dir"
  [ "$marks" = none ] && extra=(GPUACCT_PYTHON=0)
  (cd "$dir" && env -u PYTHONPATH -u GPUACCT_LIBRARY CUDA_INJECTION64_PATH="$LIB" \
     GPUACCT_OUTPUT_DIR="$dir" GPUACCT_RECORD=1 "${extra[@]}" \
     timeout 240 python3 "$ROOT/tests/gpu/loops.py" "$s" --iters 25 --clock "$dir/loop_clock.jsonl" \
     >"$dir/stdout" 2>"$dir/stderr")
  local rc=$? check expected got result
  if [ $rc -ne 0 ]; then
    row "loop $s ($marks)" "$want" "rc=$rc" "FAIL: $(tail -1 "$dir/stderr" | cut -c1-70)"
    FAILS=$((FAILS + 1)); return
  fi
  while IFS=$'\t' read -r check expected got result; do
    row "$check" "$expected" "$got" "$result"
    case "$result" in FAIL*) FAILS=$((FAILS + 1)) ;; esac
  done < <(python3 "$ROOT/tests/gpu/loop_check.py" "$dir" "$s" "$want" "$marks" "$B/bin/gpuacct")
}
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "== PyTorch loops (tests/gpu/loops.py, the one-liner as typed)"
  for spec in ${GPUACCT_CHECK_LOOPS:-launch:launch:python launch:launch:none compute:compute:python \
              graph:other:python data:data:python data:data:none accum:data:python \
              syncs:-:python syncs:-:none compile:-:python}; do
    IFS=: read -r s want marks <<<"$spec"
    loop_run "$s" "$want" "$marks"
  done
else
  row "PyTorch loops" "-" "-" "skipped: torch with CUDA not importable"
fi
fi  # loops

echo
echo "gpuacct GPU check ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), ${NGPU} GPU(s), $(( $(date +%s) - START )) s)"
printf '%-28s %-14s %-14s %s\n' "check" "expected" "got" "result"
printf '%s\n' "${ROWS[@]}"
exit $(( FAILS > 0 ))
