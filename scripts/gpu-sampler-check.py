#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Run by hand on a machine with torch and CUDA (docs/gpu.md). On a real GPU: what the progress
sampler writes while the main thread waits in torch.cuda.synchronize() behind seconds of queued
matrix products, and how much CPU the main thread burns meanwhile (the quiet rule counts CPU
inside a known wait as waiting, not progress)."""
import os, struct, sys, tempfile, threading, time
os.environ["STEPWATCH_SAMPLER_PERIOD"] = "0.05"
os.environ["STEPWATCH_BINDING"] = "ctypes"
import torch
import stepwatch
SAMPLE_SEQ, WHERE = 704, 768
BLOCK = struct.Struct("<QIIQqqqqQ")
NAMES = {0: "none", 1: "collective", 2: "device", 3: "store"}

def read(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(2000):
            d = os.pread(fd, 1024, 0)
            after = struct.unpack("<Q", os.pread(fd, 8, SAMPLE_SEQ))[0]
            seq, wait, _, count, *_rest = BLOCK.unpack_from(d, SAMPLE_SEQ)
            if seq % 2 == 0 and seq == after:
                return NAMES.get(wait, wait), count, d[WHERE:WHERE + 64].split(b"\0", 1)[0].decode()
            time.sleep(0.001)
    finally:
        os.close(fd)

def main_ticks():
    with open(f"/proc/self/task/{os.getpid()}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, clock ticks

print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), flush=True)
d = tempfile.mkdtemp()
stepwatch.init(job="gpu-sampler", dir=d, rank=0, local_rank=0, world_size=1)
path = stepwatch.path()
print("binding", stepwatch.BINDING, "sampler running", stepwatch.sampler_running(), flush=True)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()
t0 = time.monotonic(); n = 0
while time.monotonic() - t0 < 0.5:  # time one product
    b = a @ a; torch.cuda.synchronize(); n += 1
per = (time.monotonic() - t0) / n
k = int(6.0 / per)
print(f"one 8192^3 bf16 product {per*1e3:.2f} ms; queueing {k} (~6 s)", flush=True)
for _ in range(k):
    b = a @ a
seen, stop = {}, threading.Event()
def reader():
    while not stop.is_set():
        w, c, where = read(path)
        seen.setdefault((w, where), 0); seen[(w, where)] += 1
        time.sleep(0.02)
t = threading.Thread(target=reader); t.start()
tick0, w0 = main_ticks(), time.monotonic()
torch.cuda.synchronize()
wall = time.monotonic() - w0; ticks = main_ticks() - tick0
stop.set(); t.join()
hz = os.sysconf("SC_CLK_TCK")
print(f"synchronize waited {wall:.2f} s; main thread CPU meanwhile {ticks/hz:.2f} s ({100*ticks/hz/wall:.0f}%)")
for (w, where), c in sorted(seen.items(), key=lambda x: -x[1]):
    print(f"  sampler: wait={w:10s} where={where!r}: {c} reads")
ok = any(w == "device" for (w, _), c in seen.items())
print("RESULT: the sampler", "showed a device wait" if ok else "NEVER showed a device wait", flush=True)
stepwatch.finish()
sys.exit(0 if ok else 3)
