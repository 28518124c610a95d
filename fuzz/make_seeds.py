#!/usr/bin/python3
"""Writes the fuzzers' seed corpora: fuzz/corpus/beacon/ and fuzz/corpus/jsonl/.

The beacons follow include/stepwatch/beacon_v1.h byte for byte (little-endian, 1024 bytes):
valid records in several states, and one of each kind of damage the reader must report.
Deterministic, so the checked-in files only change when this script does.
Usage: fuzz/make_seeds.py [OUT_DIR]   (default: fuzz/corpus next to this script)
"""
import math
import os
import struct
import sys

MAGIC = 0x4E4F434145425753
SIZE = 1024
WALL0 = 1_700_000_000_000_000_000
MONO0 = 1_000_000_000_000


def beacon(job="job-1", host="node-1", phase="train", rank=0, local_rank=0, world=1, pid=4242,
           status=0, steps=(), beats=0, ckpt=None, loss=None, seq=0, version=1, size=SIZE,
           incarnation=0):
    """Returns the bytes of one record; steps is the list of committed step numbers."""
    step = steps[-1] if steps else -1
    count = len(steps)
    t_step = (WALL0 + 10 * count, MONO0 + 10 * count) if steps else (0, 0)
    t_beat = (WALL0 + 5, MONO0 + 5) if beats else (0, 0)
    ckpt_id, ckpt_step = ckpt if ckpt else ("", -1)
    t_ckpt = (WALL0 + 7, MONO0 + 7) if ckpt else (0, 0)
    loss_value = float("nan") if loss is None else loss
    t_loss = (WALL0 + 9, MONO0 + 9) if loss is not None else (0, 0)
    head = struct.pack(
        "<QIIQQiiiiIIqq" "qqqQqqqqQqqqdqqQq",
        MAGIC, version, size, seq, 123456, pid, rank, local_rank, world, incarnation, status,
        WALL0, MONO0,
        step, t_step[0], t_step[1], count, WALL0 + 1, MONO0 + 1, t_beat[0], t_beat[1], beats,
        ckpt_step, t_ckpt[0], t_ckpt[1], loss_value, t_loss[0], t_loss[1], 1 if steps else 0,
        max(MONO0, t_step[1], t_beat[1], t_ckpt[1], t_loss[1]))
    assert len(head) == 208, len(head)

    def fixed(text, n):
        raw = text.encode() if isinstance(text, str) else text
        return raw[:n].ljust(n, b"\0")

    strings = fixed(job, 64) + fixed(host, 64) + fixed(phase, 32) + fixed(ckpt_id, 64)
    ring = [(0, 0)] * 16
    for k, s in enumerate(steps):  # commit k+1 lands in slot k % 16
        ring[k % 16] = (s, MONO0 + 10 * (k + 1))
    body = head + strings + bytes(16) + b"".join(struct.pack("<qq", *m) for m in ring) + bytes(320)
    assert len(body) == SIZE
    return body


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    b_dir, j_dir = os.path.join(out, "beacon"), os.path.join(out, "jsonl")
    os.makedirs(b_dir, exist_ok=True)
    os.makedirs(j_dir, exist_ok=True)

    fresh = beacon(phase="init")
    seeds = {
        "valid-fresh": fresh,
        "valid-steps": beacon(steps=list(range(5)), loss=0.5, beats=2),
        "valid-wrapped-ring": beacon(steps=list(range(100, 140)), ckpt=("ckpt-120", 120), rank=3, world=8,
                                     local_rank=3, incarnation=2),
        "valid-nan-loss-finished": beacon(steps=[7], loss=math.nan, status=1, phase="eval/val"),
        "valid-other-job": beacon(job="other-job", host="", phase="ckpt:shard-1"),
        "torn-odd-seq": beacon(seq=7),
        "bad-magic": b"NOTABEACON".ljust(SIZE, b"\0"),
        "unknown-version": beacon(version=2),
        "size-mismatch": beacon(size=512),
        "truncated": fresh[:100],
        "oversized": fresh + b"\0" * 64,
        "unterminated-job": beacon(job=b"j" * 64),
        "rank-out-of-range": beacon(rank=4, world=4),
    }
    for name, data in seeds.items():
        with open(os.path.join(b_dir, name), "wb") as f:
            f.write(data)

    lines = {
        "full": '{"job":"job-1","rank":3,"time":1700000000.25,"step":42,"phase":"eval","beat":true,'
                '"checkpoint":"ckpt-40","checkpoint_step":40,"loss":0.125,"world_size":8,"local_rank":1,'
                '"pid":4242,"host":"node-3","status":"finished","incarnation":2}',
        "minimal": '{"job":"job-1","rank":0,"time":1700000000}',
        "loss-forms": '{"job":"job-1","rank":0,"time":1,"loss":"nan"}\n{"job":"job-1","rank":0,"time":2,"loss":null}\n'
                      '{"job":"job-1","rank":0,"time":3,"loss":"-inf"}\n{"job":"job-1","rank":0,"time":4,"loss":1e308}',
        "fold": '{"job":"job-1","rank":0,"time":100,"world_size":2}\n{"job":"job-1","rank":0,"time":101,"step":0}\n'
                '{"job":"job-1","rank":1,"time":101,"step":0,"phase":"compile"}\n\n'
                '{"job":"job-1","rank":0,"time":102,"checkpoint":"c1"}\r\n{"job":"other","rank":0,"time":103}\n'
                '{"job":"job-1","rank":0,"time":104,"status":"failed","step":1.0}',
        "bad-types": '{"job":"job-1","rank":"0","time":1}\n{"job":"job-1","rank":0,"time":1,"step":-1}\n'
                     '{"job":"job-1","rank":0,"time":1,"checkpoint_step":3}\n'
                     '{"job":"job-1","rank":0,"time":1,"step":9223372036854775807}',
        "not-json": '{"job":"job-1","rank":0,\n[1,2,3]\nnull\n"str"',
        # Regression: 2^63 as a float once reached an int64 cast (undefined behaviour).
        "regress-int64-float-bound": '{"job":"job-1","rank":0,"time":1,"step":9223372036854775808.0}\n'
                                     '{"job":"job-1","rank":0,"time":1,"checkpoint":"c","checkpoint_step":9.3e18}',
        "unknown-keys": '{"job":"job-1","rank":0,"time":1,"x":{"y":[1,{"z":null}]},"grad_norm":3.5}',
    }
    for name, text in lines.items():
        with open(os.path.join(j_dir, name), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
