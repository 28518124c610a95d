#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""A trainer that cannot be changed: no stepwatch import, only a log line per step.

    step 12 loss 0.4312

stepwatch watches it through the log contract (spec: [log] preset = "plain"). It checkpoints to
--ckpt-dir as step_<N>/ + step_<N>/COMMITTED and resumes from the newest committed one, like a
real trainer would; --hang-at-step makes it stop printing (and stepping) for good, in one
incarnation only when --hang-incarnation is given.
"""

import argparse
import os
import re
import sys
import time


def newest_committed(ckpt_dir):
    best = 0
    if ckpt_dir and os.path.isdir(ckpt_dir):
        for name in os.listdir(ckpt_dir):
            m = re.match(r"^step_(\d+)$", name)
            if m and os.path.exists(os.path.join(ckpt_dir, name, "COMMITTED")):
                best = max(best, int(m.group(1)))
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--step-time", type=float, default=0.1)
    p.add_argument("--ckpt-dir", default=None)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--hang-at-step", type=int, default=-1)
    p.add_argument("--hang-incarnation", type=int, default=-1)
    p.add_argument("--noise-while-hung", action="store_true", help="keep printing warnings while hung")
    p.add_argument("--exit-at-step", type=int, default=-1, help="exit before this step (0: before the first) ...")
    p.add_argument("--exit-code", type=int, default=3, help="... with this status (default 3)")
    args = p.parse_args()
    incarnation = int(os.environ.get("STEPWATCH_INCARNATION", "0"))
    if args.exit_at_step == 0:
        print("ModuleNotFoundError: No module named 'model_code'", flush=True)
        return args.exit_code
    start = newest_committed(args.ckpt_dir)
    print(f"starting at step {start + 1} (incarnation {incarnation})", flush=True)
    loss = 2.0
    for n in range(start + 1, args.steps + 1):
        if n == args.exit_at_step:
            print(f"giving up before step {n} with status {args.exit_code}", flush=True)
            return args.exit_code
        if n == args.hang_at_step and args.hang_incarnation in (-1, incarnation):
            print(f"waiting for data (next: {n})", flush=True)
            while True:
                if args.noise_while_hung:
                    print("UserWarning: still waiting for the data loader", flush=True)
                time.sleep(0.5)
        time.sleep(args.step_time)
        loss *= 0.97
        print(f"step {n} loss {loss:.4f}", flush=True)
        if args.ckpt_dir and args.ckpt_every and n % args.ckpt_every == 0:
            d = os.path.join(args.ckpt_dir, f"step_{n}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "weights.bin"), "wb") as f:
                f.write(os.urandom(256))
            open(os.path.join(d, "COMMITTED"), "w").close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
