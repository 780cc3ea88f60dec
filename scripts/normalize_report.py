#!/usr/bin/env python3
"""Prints a gpuacct report with machine-specific fields removed, for golden comparisons.

Usage: normalize_report.py REPORT.json  (or - for stdin)
"""
import json
import sys

text = sys.stdin.read() if sys.argv[1] == "-" else open(sys.argv[1]).read()
report = json.loads(text)
report.pop("generated_by", None)
report.get("run", {}).pop("source_path", None)
print(json.dumps(report, indent=1, sort_keys=True))
