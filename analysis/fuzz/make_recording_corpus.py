#!/usr/bin/env python3
"""Writes the seed corpus of recording_reader_fuzz (analysis/fuzz/recording_corpus/) from small
recordings written by `gpuacct synth`: each in versions 2 and 1, cut at a few places, and
hand-made files for the reader's special cases.  Usage:

  make_recording_corpus.py OUT_DIR V2_RECORDING...
"""
import json
import os
import struct
import sys

MAGIC = b"GPUACCT\x01"


def chunks_v2(data: bytes):
    """(type, count, payload) of every chunk of a version-2 file."""
    assert data[:8] == MAGIC and struct.unpack_from("<I", data, 8)[0] == 2
    pos, out = 16, []
    while pos < len(data):
        t, n, size, _crc, _res = struct.unpack_from("<IIQII", data, pos)
        pos += 24
        out.append((t, n, data[pos:pos + size]))
        pos += size
    return out


def v1(chunks) -> bytes:
    body = b"".join(struct.pack("<IIQ", t, n, len(p)) + p for t, n, p in chunks)
    return MAGIC + struct.pack("<II", 1, 0) + body


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)

    def put(name: str, data: bytes) -> None:
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    for path in sys.argv[2:]:
        stem = os.path.splitext(os.path.basename(path))[0]
        with open(path, "rb") as f:
            data = f.read()
        put(f"{stem}.v2.gpuacct", data)
        old = v1(chunks_v2(data))
        put(f"{stem}.v1.gpuacct", old)
        for cut in (20, len(old) // 2, len(old) - 16):
            put(f"{stem}.v1.cut{cut}.gpuacct", old[:cut])
        put(f"{stem}.v2.cut{len(data) // 2}.gpuacct", data[:len(data) // 2])

    def c(t, n, p=b""):
        return (t, n, p)

    end = c(9, 0)
    meta = json.dumps({"source": "x", "pid": 7, "rank": 1, "world_size": 2,
                       "devices": [{"id": 0, "name": "G", "sm_count": 1,
                                    "total_memory": 1}]}).encode()
    put("watermark_count0.gpuacct", v1([c(6, 0), end]))
    put("watermark.gpuacct", v1([c(6, 1, struct.pack("<q", -1)), end]))
    put("metadata.gpuacct", v1([c(7, 1, meta), end]))
    put("metadata_1e300.gpuacct", v1([c(7, 1, b'{"rank":1e300,"pid":1e300}'), end]))
    put("stats.gpuacct", v1([c(8, 1, b'{"cupti_records_dropped":3,"unknown_names":-1}'), end]))
    put("names.gpuacct", v1([c(1, 2, struct.pack("<II", 1, 1) + b"a" + struct.pack("<II", 2, 0)),
                             end]))
    put("unknown_chunk.gpuacct", v1([c(77, 1, b"zz"), end]))
    put("end_only.gpuacct", v1([end]))


if __name__ == "__main__":
    main()
