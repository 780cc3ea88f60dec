#!/usr/bin/env bash
# `gpuacct analyze` writes <name>.collectives.csv (schema gpuacct.collectives/1,
# analysis/model/collective_rows.h) beside <name>.steps.csv when the input has NCCL collectives:
# the two ranks of HTA's sampled_rank traces give one row per NCCL kernel, and the same
# (comm, seq) instances on both ranks.  The files stay all-or-nothing.
# Usage: collectives_cli_test.sh <gpuacct binary> <repo root>
set -u
bin="$1"
root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}
data="$root/tests/data/kineto"

"$bin" analyze "$data/sampled_rank-0.json.gz" "$data/sampled_rank-1.json.gz" --out "$tmp/o" \
  >/dev/null 2>"$tmp/err" || fail "analyze of the sampled ranks: $(cat "$tmp/err")"
for r in 0 1; do
  f="$tmp/o/sampled_rank-$r.collectives.csv"
  [ -s "$f" ] || { fail "no $f: $(ls "$tmp/o")"; continue; }
  grep -qF "sampled_rank-$r.collectives.csv" "$tmp/err" || fail "the written files do not name $f"
  head -1 "$f" | grep -q '^# gpuacct.collectives/1 {.*"identity":"kernel_order"' ||
    fail "rank $r: header $(head -1 "$f")"
  head -1 "$f" | grep -q "\"rank\":$r," || fail "rank $r: header does not say its rank"
  sed -n 2p "$f" | grep -qx 'step_index,comm,seq,collective,bytes,datatype,algo,proto,rank,nranks,device,stream,host_enqueue_ns,gpu_start_ns,gpu_end_ns,source,kernel_ops' ||
    fail "rank $r: column line $(sed -n 2p "$f")"
  # One row per NCCL kernel of the trace, counted in the trace itself.
  kernels=$(zcat "$data/sampled_rank-$r.json.gz" | grep -o '"name": *"ncclKernel' | wc -l)
  rows=$(grep -vc '^#' "$f")
  rows=$((rows - 1))  # the column line
  [ "$kernels" -gt 0 ] || fail "rank $r: no NCCL kernel found in the trace"
  [ "$rows" = "$kernels" ] || fail "rank $r: $rows rows for $kernels NCCL kernels"
  tail -1 "$f" | grep -qx "# end {\"rows\":$kernels,\"rows_lost\":0}" || fail "rank $r: trailer $(tail -1 "$f")"
  # Every kernel was launched inside a ProfilerStep: every row has a step.
  awk -F, '!/^#/ && NR > 2 && $1 < 0 { bad = 1 } END { exit bad }' "$f" || fail "rank $r: a row without a step"
  awk -F, '!/^#/ && NR > 2 { print $2 "," $3 "," $4 }' "$f" | sort >"$tmp/ids$r"
done
if [ -s "$tmp/ids0" ]; then
  [ "$(sort -u "$tmp/ids0" | wc -l)" = "$(wc -l <"$tmp/ids0")" ] || fail "rank 0: (comm, seq) repeats"
  cmp -s "$tmp/ids0" "$tmp/ids1" || fail "the ranks' (comm, seq, collective) differ: $(diff "$tmp/ids0" "$tmp/ids1" | head -4)"
fi

# The job view of the two ranks (job.json beside their reports): their send/recv kernels have no
# peer in the trace, so they are not matched across ranks (the i-th of rank 0 and the i-th of
# rank 1 are transfers with other stages); waiting vs transfer is the floor's -- recomputed here
# from the two steps CSVs -- and each rank's send/recv are listed per rank.
python3 - "$tmp/o" <<'PY' || fail "job view of the sampled ranks (above)"
import csv, json, sys
d = sys.argv[1]
job = json.load(open(d + "/job.json"))
errors = []
def check(ok, what):
    if not ok:
        errors.append(what)
check(job["method"] == "step_rows_floor", "method %s" % job["method"])
check(job["collectives"]["instances"] == 0, "instances matched: %s" % job["collectives"]["instances"])
rows = {}
for r in (0, 1):
    for row in csv.DictReader(open("%s/sampled_rank-%d.steps.csv" % (d, r))):
        if row["warmup"] != "0":
            continue
        rows.setdefault(int(row["step_index"]), {}).setdefault(r, int(row["comm_exposed_ns"]))
common = [s for s in sorted(rows) if len(rows[s]) == 2]
check(len(common) == job["steps"]["count"] == 2, "common steps %s vs %s" % (common, job["steps"]["count"]))
for rank in job["ranks"]:
    r = rank["rank"]
    waited = sum(rows[s][r] - min(rows[s].values()) for s in common) / len(common) / 1e6
    transfer = sum(min(rows[s].values()) for s in common) / len(common) / 1e6
    check(abs(rank["waited_ms"] - waited) < 1e-3, "rank %d waited %s, floor %s" % (r, rank["waited_ms"], waited))
    check(abs(rank["transfer_ms"] - transfer) < 1e-3, "rank %d transfer %s, floor %s" % (r, rank["transfer_ms"], transfer))
un = job["matching"]["unmatched"]
check([(u["rank"], u["collective"], u["records"], u["reason"]) for u in un] ==
      [(0, "SendRecv", 10, "p2p_without_peer"), (1, "SendRecv", 10, "p2p_without_peer")], "unmatched %s" % un)
check(any("not matched across ranks" in n for n in job["matching"]["notes"]), "notes %s" % job["matching"]["notes"])
for e in errors:
    print("FAIL: " + e)
sys.exit(1 if errors else 0)
PY
"$bin" analyze "$data/sampled_rank-0.json.gz" "$data/sampled_rank-1.json.gz" --no-files >"$tmp/job.txt" 2>/dev/null
grep -q "2 steps compared (step rows only: transfer floor)" "$tmp/job.txt" || fail "terminal: $(grep 'gpuacct job' "$tmp/job.txt")"
grep -q "^matching: 20 point-to-point records without their peer" "$tmp/job.txt" || fail "terminal: no matching line"
grep -Eq "^ +0  SendRecv +10 .*p2p_without_peer" "$tmp/job.txt" || fail "terminal: no unmatched SendRecv row for rank 0"

# An input without collectives writes none, and a stale one of the same name goes: it would be
# read as this report's.
"$bin" synth --preset data_bound --steps 4 -o "$tmp/db.gpuacct" 2>/dev/null
mkdir -p "$tmp/o2"
echo stale >"$tmp/o2/db.collectives.csv"
"$bin" analyze "$tmp/db.gpuacct" --out "$tmp/o2" >/dev/null 2>&1 || fail "analyze of a recording without collectives"
[ -f "$tmp/o2/db.report.json" ] || fail "no report for the recording without collectives"
[ -e "$tmp/o2/db.collectives.csv" ] && fail "a stale collectives file was left beside a report without collectives"

# A step stream holds rows, not events: the live run's own collectives file beside it is kept.
python3 - "$tmp/o2/db.report.json" "$tmp/run.steps.jsonl" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["steps"]
with open(sys.argv[2], "w") as f:
    f.write(json.dumps({"schema": "gpuacct.steps/1", "source": "injected", "pid": 7}) + "\n")
    for r in rows:
        f.write(json.dumps(r) + "\n")
PY
mkdir -p "$tmp/o4"
echo live >"$tmp/o4/run.collectives.csv"
"$bin" analyze "$tmp/run.steps.jsonl" --out "$tmp/o4" >/dev/null 2>&1 || fail "analyze of a step stream"
[ -f "$tmp/o4/run.report.json" ] || fail "no report for the step stream: $(ls "$tmp/o4")"
[ "$(cat "$tmp/o4/run.collectives.csv" 2>/dev/null)" = live ] ||
  fail "analyze of a step stream replaced or removed the live run's collectives file"

# All or nothing: the collectives file cannot be written (a directory has its name), so neither
# the steps CSV nor the report is left.
mkdir -p "$tmp/o3/sampled_rank-0.collectives.csv"
if "$bin" analyze "$data/sampled_rank-0.json.gz" --out "$tmp/o3" >/dev/null 2>"$tmp/err3"; then
  fail "analyze succeeded although its collectives file could not be written"
fi
grep -q "is a directory" "$tmp/err3" || fail "no clear message: $(cat "$tmp/err3")"
[ -e "$tmp/o3/sampled_rank-0.steps.csv" ] && fail "a steps CSV was left without its collectives and report"
[ -e "$tmp/o3/sampled_rank-0.report.json" ] && fail "a report was left without its collectives file"

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)"
  exit 1
fi
echo "collectives CLI: all passed"
