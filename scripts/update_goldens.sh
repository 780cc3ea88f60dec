#!/usr/bin/env bash
# Regenerates the golden report of the bundled sample after an intended accounting change.
# Review the diff before committing it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="${1:-$root/build/bin/gpuacct}"
"$bin" analyze "$root/examples/data/sample.gpuacct" --no-files --json |
  python3 "$root/scripts/normalize_report.py" - >"$root/tests/golden/sample.report.json"
git -C "$root" diff --stat -- tests/golden/sample.report.json
