"""The names of one rank's files, from the one table C++ compiles in (``rank_files.json`` beside
this module: a link to analysis/job/rank_files.json in the source tree, a copy in an installed
package).  ``gpuacct.load`` finds a folder's reports and tells a step stream from a report with
it; analysis/job/rank_files.h is the C++ side (docs/job_view.md, *A rank's files*).
"""

from __future__ import annotations

import json
import os
from typing import Dict, List, NamedTuple, Optional, Tuple

_TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rank_files.json")


class _Suffix(NamedTuple):
    text: str
    kind: str
    alone: str
    digits_after: bool
    by_content: bool


class RankFileName(NamedTuple):
    kind: str         # "report", "step_stream", "collectives", "recording", "trace", "other"
    base: str         # the name without its kind's suffix ("" for report.json alone)
    alone: bool       # named after its kind alone: the rank is its folder
    by_content: bool  # the name leaves it open (a trace or an old-name report; any .jsonl)
    tool_output: bool  # job.json, *.timeline.json, *.steps.csv, the export tables


def _load_table() -> Tuple[List[_Suffix], List[str], List[str]]:
    with open(_TABLE_FILE, encoding="utf-8") as f:
        table = json.load(f)
    suffixes = [_Suffix(e["suffix"], e["kind"], e.get("alone", ""), e.get("then") == "digits",
                        "or_by_content" in e) for e in table["files"]]
    suffixes.sort(key=lambda s: -len(s.text))  # longest first, as the C++ side
    tools = table.get("tool_outputs", {})
    return suffixes, list(tools.get("names", [])), list(tools.get("suffixes", []))


_SUFFIXES, _TOOL_NAMES, _TOOL_SUFFIXES = _load_table()


def rank_file_name(name: str) -> RankFileName:
    """What a file's name (no folder) says it is (analysis/job/rank_files.h rank_file_name)."""
    if name in _TOOL_NAMES or any(name.endswith(s) and len(name) > len(s) for s in _TOOL_SUFFIXES):
        return RankFileName("other", name, False, False, True)
    for s in _SUFFIXES:
        if s.alone and name == s.alone:
            return RankFileName(s.kind, "", True, False, False)
    for s in _SUFFIXES:
        if s.digits_after:
            at = name.rfind(s.text)
            rest = name[at + len(s.text):] if at > 0 else ""
            if rest.isdigit() and rest.isascii():
                return RankFileName(s.kind, name[:at], False, s.by_content, False)
        elif name.endswith(s.text) and len(name) > len(s.text):
            return RankFileName(s.kind, name[:-len(s.text)], False, s.by_content, False)
    return RankFileName("other", name, False, False, False)


def rank_file(base: str, kind: str) -> Optional[str]:
    """The file a writer gives ``base`` for ``kind``: <base>.report.json, <base>.steps.jsonl,
    <base>.collectives.csv, <base>.gpuacct; None for kinds no tool writes."""
    for s in _SUFFIXES:
        if s.kind == kind and s.alone:
            return base + s.text
    for s in _SUFFIXES:
        if s.kind == kind and kind != "trace" and not s.digits_after and not s.by_content:
            return base + s.text
    return None


def kinds_in(directory: str) -> Dict[str, List[str]]:
    """The files of ``directory`` (not recursive) by the kind their names say, tool outputs
    left out; names that leave the kind open are under "by_content"."""
    out: Dict[str, List[str]] = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        full = os.path.join(directory, name)
        if not os.path.isfile(full):
            continue
        n = rank_file_name(name)
        if n.tool_output or n.kind == "other":
            continue
        out.setdefault("by_content" if n.by_content else n.kind, []).append(full)
    return out
