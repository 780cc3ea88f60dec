#!/usr/bin/env bash
# One prepared GPU run for a lent machine: binaries built elsewhere and carried (no build here),
# the checks in priority order under one deadline, the results packed into at most 8 files.
#
#   tests/gpu/device_run.sh OUT_DIR [BUILD_DIR] [SECTIONS...]
#
# BUILD_DIR (default build-gpu) holds what tests/gpu/prepare_device_build.sh built: libgpuacct.so,
# bin/gpuacct, examples/, bare_cupti_tracer.so, and lib/ with libraries the image lacks
# (libunwind).  SECTIONS (default: loops examples held nccl counters overhead matrix) run in the
# order given: check.sh's sections one by one, and "matrix" (tests/gpu/overhead_matrix.py, its
# budget GPUACCT_MATRIX_BUDGET_S, default 230, within the run's deadline; GPUACCT_MATRIX_ARGS
# adds arguments).  GPUACCT_DEVICE_DEADLINE_S (default 500) stops starting new sections once passed.
# OUT_DIR gets: check.log (every table), runs.tgz (reports, step streams, stderr, loop clocks),
# recordings.tgz (the loops' recordings, when under 15 MiB), and whatever the matrix writes.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(realpath -m "${1:?usage: device_run.sh OUT_DIR [BUILD_DIR] [SECTIONS...]}")
B=$(realpath -m "${2:-$ROOT/build-gpu}")
shift $(( $# >= 2 ? 2 : $# ))
SECTIONS=("$@")
[ ${#SECTIONS[@]} -eq 0 ] && SECTIONS=(loops examples held nccl counters overhead matrix)
DEADLINE=$(( $(date +%s) + ${GPUACCT_DEVICE_DEADLINE_S:-500} ))
mkdir -p "$OUT"
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LOG="$OUT/check.log"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)" 2>&1
  ldd "$B/inject/libgpuacct.so" | grep -E "not found|unwind" || true
} >"$LOG"

pack() {  # everything so far, small files only (recordings apart)
  (cd "$B" && find gpu_check -type f \( -name '*.json' -o -name '*.jsonl' -o -name stderr \
     -o -name stdout -o -name '*.csv' -o -name '*.txt' -o -name '*.log' \) -size -4M -print0 |
     tar czf "$OUT/runs.tgz" --null -T - 2>/dev/null)
}

for s in "${SECTIONS[@]}"; do
  if [ "$(date +%s)" -ge "$DEADLINE" ]; then
    echo "== $s: skipped, the run's deadline passed" >>"$LOG"; continue
  fi
  t0=$(date +%s)
  if [ "$s" = matrix ]; then
    # The overhead matrix (issue 28): its own budget, within what is left of the run's.
    left=$(( DEADLINE - $(date +%s) - 10 ))
    budget=$(( left < ${GPUACCT_MATRIX_BUDGET_S:-230} ? left : ${GPUACCT_MATRIX_BUDGET_S:-230} ))
    # GPUACCT_MATRIX_ARGS: more arguments (--rows, --programs, --rounds, --keep), unquoted.
    # shellcheck disable=SC2086
    python3 "$ROOT/tests/gpu/overhead_matrix.py" "$B" "$OUT/matrix" --budget-s "$budget" \
      ${GPUACCT_MATRIX_ARGS:-} >>"$LOG" 2>&1
  else
    GPUACCT_CHECK_PREBUILT=1 GPUACCT_CHECK_SECTIONS="$s" "$ROOT/tests/gpu/check.sh" "$B" >>"$LOG" 2>&1
  fi
  echo "== section $s took $(( $(date +%s) - t0 )) s" >>"$LOG"
  pack
done
# The loops' recordings: new real inputs for tests/data (gzip keeps them small).
(cd "$B" && find gpu_check -name '*.gpuacct' -print0 | tar czf "$OUT/recordings.tgz" --null -T - 2>/dev/null)
if [ "$(stat -c %s "$OUT/recordings.tgz" 2>/dev/null || echo 0)" -gt $((15 << 20)) ]; then
  rm -f "$OUT/recordings.tgz"
  echo "recordings.tgz over 15 MiB: left out" >>"$LOG"
fi
echo "device_run done" >>"$LOG"
