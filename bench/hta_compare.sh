#!/usr/bin/env bash
# gpuacct analyze against Meta's HTA (HolisticTraceAnalysis) on the same Kineto trace
# (issue 17 §1: ">= 300x HTA's speed"; results in docs/kineto_import.md, "HTA, measured again").
#
#   HTA_VENV=/tmp/hta-venv bench/hta_compare.sh [options] TRACE.json[.gz]
#   bench/hta_compare.sh --hta-venv /tmp/hta-venv [options] TRACE.json[.gz]
#
# A manual benchmark, not a test: nothing in the build, ctest or CI runs it, and the project
# never installs HTA.  Make a throwaway virtual environment outside the repo, e.g.
#   /usr/bin/python3 -m venv --system-site-packages /tmp/hta-venv
#   /tmp/hta-venv/bin/pip install --no-deps HolisticTraceAnalysis
#   /tmp/hta-venv/bin/pip install networkx plotly pydot     # what HTA imports beyond pandas, numpy,
#                                              # psutil and pyyaml (Debian's, seen through the venv)
# Without an importable HTA the script says so in one line and exits 2.
#
# What is timed, in alternating rounds on the same file (HTA's rounds spread among gpuacct's):
#   HTA      a fresh python process: import hta, TraceAnalysis(trace_dir=<a folder holding only
#            the trace>) (parse + last-step filter), get_temporal_breakdown(visualize=False) —
#            what docs/kineto_import.md timed before; --hta-all adds get_comm_comp_overlap and
#            get_idle_time_breakdown, i.e. all of what gpuacct's "hta_totals" section computes.
#   gpuacct  `gpuacct analyze --no-files TRACE` (importer, accountant, step detection,
#            hta_totals, the printed summary).
# Wall seconds of each process (date +%s%N around it); CPU seconds (user + sys, children
# included; 10 ms steps) and peak RSS from /usr/bin/time (for HTA the largest process: it parses
# in a forked pool worker).  Prints the medians, the speed, CPU-time and memory ratios, the load
# average before and after (the machine is shared: compare ratios from one run, not seconds
# across runs), and checks HTA's temporal breakdown against gpuacct's hta_totals
# (one untimed `--json` run).
#
# options: --hta-rounds N (3)  --gpuacct-rounds N (7)  --gpuacct PATH (default build/bin/gpuacct)
#          --hta-all
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${HTA_VENV:-}" hta_rounds=3 g_rounds=7 gpuacct="$root/build/bin/gpuacct" hta_all=0 trace=
usage="usage: HTA_VENV=DIR bench/hta_compare.sh [--hta-venv DIR] [--hta-rounds N] [--gpuacct-rounds N] [--gpuacct PATH] [--hta-all] TRACE"
while [ $# -gt 0 ]; do
  case "$1" in
    --hta-venv) venv="$2"; shift 2 ;;
    --hta-rounds) hta_rounds="$2"; shift 2 ;;
    --gpuacct-rounds) g_rounds="$2"; shift 2 ;;
    --gpuacct) gpuacct="$2"; shift 2 ;;
    --hta-all) hta_all=1; shift ;;
    -h|--help) echo "$usage"; exit 0 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) trace="$1"; shift ;;
  esac
done
[ -n "$trace" ] || { echo "$usage" >&2; exit 2; }
[ -f "$trace" ] || { echo "hta_compare.sh: no such trace: $trace" >&2; exit 2; }
case "$trace" in *.json|*.json.gz) ;; *) echo "hta_compare.sh: HTA reads *.json or *.json.gz only: $trace" >&2; exit 2 ;; esac
[ -n "$venv" ] || { echo "hta_compare.sh: no HTA venv: set HTA_VENV or pass --hta-venv DIR" >&2; exit 2; }
py="$venv/bin/python"
hta_version="$("$py" -c 'import hta.trace_analysis, importlib.metadata as m; print(m.version("HolisticTraceAnalysis"))' 2>/dev/null)" ||
  { echo "hta_compare.sh: HTA is not importable by $py (install HolisticTraceAnalysis there; see the top of this script)" >&2; exit 2; }
[ -x "$gpuacct" ] || { echo "hta_compare.sh: no gpuacct binary at $gpuacct (build gpuacct_cli or pass --gpuacct)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "hta_compare.sh: /usr/bin/time (GNU time) is needed for peak RSS" >&2; exit 2; }

work="$(mktemp -d /tmp/hta_compare.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/dir"  # HTA takes a folder and reads every trace in it: give it this one only
ln -s "$(cd "$(dirname "$trace")" && pwd)/$(basename "$trace")" "$work/dir/$(basename "$trace")"

# The HTA side; its stdout: one "split" line (seconds inside the process) and one "temporal" line.
cat >"$work/hta_run.py" <<'EOF'
import sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
row = analysis.get_temporal_breakdown(visualize=False).iloc[0]
if sys.argv[2] == "1":
    analysis.get_comm_comp_overlap(visualize=False)
    analysis.get_idle_time_breakdown(visualize=False)
t3 = time.perf_counter()
rows = len(analysis.t.get_trace(int(row["rank"])))
print(f"split import_s={t1 - t0:.2f} load_s={t2 - t1:.2f} analysis_s={t3 - t2:.2f} rows_kept={rows}")
print("temporal", *(int(row[c]) for c in ("kernel_time(us)", "idle_time(us)", "compute_time(us)",
                                           "non_compute_time(us)")))
EOF

now_ns() { date +%s%N; }
# time_one NAME CMD...: appends "wall_ms peak_kib cpu_s" to $work/NAME.times; stdout to $work/NAME.out.
time_one() {
  local name="$1"; shift
  local t0 t1
  t0=$(now_ns)
  /usr/bin/time -f "%M %U %S" -o "$work/rss" "$@" >"$work/$name.out" 2>"$work/$name.err" ||
    { echo "hta_compare.sh: $name failed:" >&2; tail -5 "$work/$name.err" >&2; exit 1; }
  t1=$(now_ns)
  echo "$(( (t1 - t0) / 1000000 )) $(tail -1 "$work/rss" | awk '{print $1, $2 + $3}')" >>"$work/$name.times"
}
median_col() {  # median_col FILE COLUMN -> the middle value (upper middle for an even count)
  awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{v[NR]=$1} END {print v[int(NR/2)+1]}'
}

json_bytes=$(case "$trace" in *.gz) gzip -dc "$trace" | wc -c ;; *) wc -c <"$trace" ;; esac)
events=$(case "$trace" in *.gz) gzip -dc "$trace" ;; *) cat "$trace" ;; esac | grep -o '"ph"' | wc -l)
echo "trace: $trace  ($(wc -c <"$trace") bytes on disk, $json_bytes bytes of JSON, $events trace events)"
echo "HTA $hta_version ($("$py" -c 'import pandas, numpy, sys; print(f"pandas {pandas.__version__}, numpy {numpy.__version__}, python {sys.version.split()[0]}")')); analyses: $([ $hta_all = 1 ] && echo 'temporal + comm/comp overlap + idle breakdown' || echo 'temporal breakdown')"
echo "gpuacct: $gpuacct ($("$gpuacct" --version 2>&1 | tr '\n' ';' | sed 's/;$//')); $(nproc) cores"
echo "load average before: $(uptime | sed 's/.*load average: //')"

for ((r = 0; r < g_rounds; ++r)); do
  time_one gpuacct "$gpuacct" analyze --no-files "$trace"
  if (( r * hta_rounds / g_rounds != (r + 1) * hta_rounds / g_rounds )); then
    time_one hta "$py" "$work/hta_run.py" "$work/dir" "$hta_all"
    echo "  HTA round: $(tail -1 "$work/hta.times" | awk '{printf "%.2f s, %.0f MiB", $1/1000, $2/1024}'), $(grep '^split' "$work/hta.out"), load $(uptime | sed 's/.*load average: //')"
  fi
done
echo "load average after:  $(uptime | sed 's/.*load average: //')"

hta_ms=$(median_col "$work/hta.times" 1) hta_kib=$(median_col "$work/hta.times" 2)
g_ms=$(median_col "$work/gpuacct.times" 1) g_kib=$(median_col "$work/gpuacct.times" 2)
hta_cpu=$(median_col "$work/hta.times" 3) g_cpu=$(median_col "$work/gpuacct.times" 3)
hta_max_kib=$(sort -n -k2 "$work/hta.times" | tail -1 | awk '{print $2}')
g_max_kib=$(sort -n -k2 "$work/gpuacct.times" | tail -1 | awk '{print $2}')
awk -v hc="$hta_cpu" -v gc="$g_cpu" -v hm="$hta_ms" -v hk="$hta_kib" -v hx="$hta_max_kib" -v gm="$g_ms" -v gk="$g_kib" -v gx="$g_max_kib" \
  -v hr="$(wc -l <"$work/hta.times")" -v gr="$(wc -l <"$work/gpuacct.times")" 'BEGIN {
  printf "%-28s %6s %10s %14s %18s %10s\n", "", "rounds", "median s", "median CPU s", "median peak MiB", "max MiB"
  printf "%-28s %6d %10.3f %14.2f %18.1f %10.1f\n", "HTA load + analysis", hr, hm/1000, hc, hk/1024, hx/1024
  printf "%-28s %6d %10.3f %14.2f %18.1f %10.1f\n", "gpuacct analyze --no-files", gr, gm/1000, gc, gk/1024, gx/1024
  printf "speed ratio (HTA / gpuacct, median wall): %.0fx   CPU-time ratio: %s   memory ratio: %.1fx\n",
         hm/gm, (gc > 0 ? sprintf("%.0fx", hc/gc) : "n/a (under 10 ms)"), hk/gk }'
echo "gpuacct wall samples (ms): $(awk '{print $1}' "$work/gpuacct.times" | tr '\n' ' ')"
echo "HTA wall samples (ms):     $(awk '{print $1}' "$work/hta.times" | tr '\n' ' ')"

# Same numbers?  HTA's whole-trace temporal breakdown against gpuacct's hta_totals (untimed).
"$gpuacct" analyze --no-files --json "$trace" >"$work/report.json"
read -r _ h_kernel h_idle h_compute h_noncompute < <(grep '^temporal' "$work/hta.out")
read -r g_kernel g_idle g_compute g_noncompute < <(/usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["hta_totals"]
print(t["kernel_time_us"], t["idle_us"], t["compute_us"], t["non_compute_us"])' "$work/report.json")
echo "temporal breakdown (kernel_time idle compute non_compute, us): HTA $h_kernel $h_idle $h_compute $h_noncompute; gpuacct $g_kernel $g_idle $g_compute $g_noncompute: $(
  [ "$h_kernel $h_idle $h_compute $h_noncompute" = "$g_kernel $g_idle $g_compute $g_noncompute" ] && echo identical || echo DIFFERENT)"
