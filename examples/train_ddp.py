#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""A small real PyTorch DDP training (gloo, CPU, synthetic data) instrumented with stepwatch.

Each rank is started with the env:// variables (MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK,
WORLD_SIZE), for example by examples/launch.py:

    STEPWATCH_JOB=demo STEPWATCH_DIR=/tmp/sw /usr/bin/python3 examples/launch.py --nproc 2 \\
        examples/train_ddp.py --steps 200 --step-time 0.1 --ckpt-dir /tmp/ckpt --ckpt-every 50 --eval-every 20
    stepwatch status --dir /tmp/sw demo

What it reports: the beacon is opened before the process group (a hung rendezvous shows as a
rank stuck in "init"); the first step runs in phase "compile"; every optimizer step is
step(n, loss); every --eval-every steps a phase "eval" with a beat per batch; every --ckpt-every
steps a phase "checkpoint" that writes step_<N>/model.pt, then the commit marker
step_<N>/COMMITTED, then reports checkpoint_committed("step_<N>", N). A restart resumes from
the newest step_<N> that has its COMMITTED marker (with --resume-from-env: from the one stepwatch
names in STEPWATCH_RESUME_DIR and STEPWATCH_RESUME_STEP, as a trainer whose resume_command passes
{checkpoint_id} does). SIGUSR1 writes every thread's stack to
$STEPWATCH_DIR/<job>/rank-<rank>.stacks.

--hang-rank R --hang-at-step S makes rank R sleep forever before step S, so the other ranks block
inside a gloo all-reduce: the stalled-collective case a watchdog has to catch.
"""

import argparse
import contextlib
import os
import re
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import stepwatch as _stepwatch

FEATURES = 16
EVAL_OFFSET = 1_000_000  # batch indices of the evaluation set
COMMITTED = "COMMITTED"
_CKPT_RE = re.compile(r"^step_(\d+)$")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100, help="train until this optimizer step (default 100)")
    p.add_argument("--step-time", type=float, default=0.0, help="extra seconds per step and per eval batch")
    p.add_argument("--compute", type=float, default=0.0,
                   help="seconds of real compute (matrix products) inside each step, as a large model's step")
    p.add_argument("--ckpt-dir", default=None, help="checkpoint directory (shared by the ranks); none: no checkpoints")
    p.add_argument("--ckpt-every", type=int, default=0, help="checkpoint every N steps (0: never)")
    p.add_argument("--resume-from-env", action="store_true",
                   help="resume only from the checkpoint the watchdog names (STEPWATCH_RESUME_DIR, "
                        "else STEPWATCH_RESUME_CHECKPOINT in --ckpt-dir; STEPWATCH_RESUME_STEP), not from "
                        "the newest in --ckpt-dir: a trainer whose resume_command passes {checkpoint_id}")
    p.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (0: never)")
    p.add_argument("--eval-batches", type=int, default=4, help="batches per evaluation (default 4)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hang-rank", type=int, default=-1, help="this rank hangs (demo of a stalled collective)")
    p.add_argument("--hang-at-step", type=int, default=-1, help="before this step")
    p.add_argument("--hang-incarnation", type=int, default=-1,
                   help="hang only in this incarnation ($STEPWATCH_INCARNATION), so a resumed job finishes")
    p.add_argument("--crash-rank", type=int, default=-1, help="this rank exits with status 1 ...")
    p.add_argument("--crash-at-step", type=int, default=-1, help="... before this step")
    p.add_argument("--crash-how", choices=("exit", "raise", "kill"), default="exit",
                   help="how the crashing rank dies: os._exit(1), an uncaught exception, or SIGKILL (default exit)")
    p.add_argument("--no-finish", action="store_true",
                   help="never call stepwatch.finish(), as most trainers are written: the package's exit hook says "
                        "how the rank ended")
    p.add_argument("--linger-rank", type=int, default=-1, help="this rank stays on after the last step ...")
    p.add_argument("--linger", type=float, default=0.0, help="... this many seconds (a final save, unlabeled)")
    p.add_argument("--label-data", action="store_true", help="label each batch fetch as phase \"data\"")
    p.add_argument("--uninstrumented", action="store_true", help="no stepwatch calls at all; print a step line instead")
    args = p.parse_args(argv)
    if args.ckpt_every and not args.ckpt_dir:
        p.error("--ckpt-every needs --ckpt-dir")
    return args


def log(rank, message):
    print(f"[rank {rank}] {message}", flush=True)


def make_batch(seed, step, rank, batch_size):
    """A deterministic batch for (step, rank): a noisy linear teacher, so the loss goes down."""
    teacher = torch.Generator().manual_seed(seed)
    w = torch.randn(FEATURES, 1, generator=teacher)
    g = torch.Generator().manual_seed(seed * 1_000_003 + step * 1009 + rank)
    x = torch.randn(batch_size, FEATURES, generator=g)
    y = x @ w + 0.01 * torch.randn(batch_size, 1, generator=g)
    return x, y


def newest_committed(ckpt_dir):
    """(step, path) of the newest step_<N> directory with its commit marker, or None."""
    if not ckpt_dir or not os.path.isdir(ckpt_dir):
        return None
    best = None
    for name in os.listdir(ckpt_dir):
        m = _CKPT_RE.match(name)
        path = os.path.join(ckpt_dir, name)
        if m and os.path.isfile(os.path.join(path, COMMITTED)) and os.path.isfile(os.path.join(path, "model.pt")):
            if best is None or int(m.group(1)) > best[0]:
                best = (int(m.group(1)), path)
    return best


def _fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(ckpt_dir, step, model, optimizer):
    """step_<N>/model.pt, durable, then step_<N>/COMMITTED: only a marked directory is a resume point."""
    d = os.path.join(ckpt_dir, f"step_{step}")
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "model.pt.tmp")
    torch.save({"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict()}, tmp)
    _fsync_path(tmp)
    os.replace(tmp, os.path.join(d, "model.pt"))
    with open(os.path.join(d, COMMITTED), "w") as f:
        f.write(f"step {step}\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_path(d, directory=True)
    _fsync_path(ckpt_dir, directory=True)


def crash(rank, step, how):
    """Dies as a rank on a lost node would: its peers get no FIN, so they block in gloo until its
    30-minute timeout. (On one host the kernel would close our sockets at exit and wake them; a
    child that keeps the sockets open stands in for the lost network.) `how`: os._exit(1), an
    uncaught exception, or SIGKILL."""
    log(rank, f"crashing before step {step} (--crash-rank, {how}) at {time.time():.3f}")
    if os.fork() == 0:
        while True:
            time.sleep(3600)
    if how == "raise":
        raise RuntimeError(f"rank {rank}: crash before step {step} (--crash-how raise)")
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(1)


class _Uninstrumented:
    """--uninstrumented: a trainer that cannot be changed. Every stepwatch call does nothing; the
    watchdog sees the processes and the printed step lines only."""

    def __getattr__(self, name):
        if name == "phase":
            return lambda *a, **k: contextlib.nullcontext()
        if name == "is_initialized":
            return lambda: False
        if name == "path":
            return lambda: "(none)"
        return lambda *a, **k: True


stepwatch = _stepwatch


def this_incarnation(wanted):
    return wanted < 0 or int(os.environ.get("STEPWATCH_INCARNATION", "0")) == wanted


def hang_forever(rank, step):
    log(rank, f"hanging before batch {step} (--hang-rank) at {time.time():.3f}")
    while True:
        time.sleep(3600)


def compute(seconds):
    """Real work inside the step for `seconds`: what a large model's forward and backward are to
    the watchdog (the main thread busy, its frames moving), at a small model's memory."""
    a = torch.randn(192, 192)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        a = torch.tanh(a @ a / 14.0)


def evaluate(args, model, rank):
    with stepwatch.phase("eval"):
        model.eval()
        total = torch.zeros(2)
        with torch.no_grad():
            for i in range(args.eval_batches):
                x, y = make_batch(args.seed, EVAL_OFFSET + i, rank, args.batch_size)  # held-out batches
                total[0] += nn.functional.mse_loss(model(x), y)
                total[1] += 1
                if args.step_time:
                    time.sleep(args.step_time)
                stepwatch.beat()
        dist.all_reduce(total)
        model.train()
    return float(total[0] / total[1])


def train(args):
    # The beacon first: a rank that never gets through rendezvous is visible as stuck in "init".
    stepwatch.init()
    stepwatch.install_stack_dump()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    net = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
    start = 0
    if args.resume_from_env:
        named = os.environ.get("STEPWATCH_RESUME_DIR")
        # `stepwatch run --coord` names the checkpoint by id alone (the job's leader knows no
        # directory): it is the directory of that name in --ckpt-dir.
        by_id = os.environ.get("STEPWATCH_RESUME_CHECKPOINT")
        if not named and by_id and args.ckpt_dir:
            named = os.path.join(args.ckpt_dir, by_id)
        resume = (int(os.environ["STEPWATCH_RESUME_STEP"]), named) if named else None
        if resume is None:
            log(rank, "no resume point named (STEPWATCH_RESUME_DIR, STEPWATCH_RESUME_CHECKPOINT unset): "
                      "from scratch")
    else:
        resume = newest_committed(args.ckpt_dir)
    if resume is not None:
        start, path = resume
        state = torch.load(os.path.join(path, "model.pt"), map_location="cpu")
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        stepwatch.checkpoint_committed(f"step_{start}", start)  # the resume point is the last committed one
        log(rank, f"resumed from step_{start} ({path})")
    model = DistributedDataParallel(net)
    log(rank, f"world {world}, steps {start + 1}..{args.steps}, beacon {stepwatch.path()}")
    if stepwatch is _stepwatch:  # which package this rank imported: a venv's, the build tree's, the system's
        where = os.path.dirname(os.path.abspath(_stepwatch.__file__))
        log(rank, f"stepwatch {_stepwatch.__version__}, binding {_stepwatch.BINDING}, from {where}")

    loss = float("nan")
    for n in range(start + 1, args.steps + 1):
        if rank == args.crash_rank and n == args.crash_at_step and this_incarnation(args.hang_incarnation):
            crash(rank, n, args.crash_how)
        with stepwatch.phase("data") if args.label_data else contextlib.nullcontext():
            # A data loader that never delivers: the rank waits here, the others in allreduce.
            if rank == args.hang_rank and n == args.hang_at_step and this_incarnation(args.hang_incarnation):
                hang_forever(rank, n)
            x, y = make_batch(args.seed, n, rank, args.batch_size)
        # The first step pays for lazy initialisation (allocator, DDP buckets): its own phase.
        with stepwatch.phase("compile") if n == start + 1 else contextlib.nullcontext():
            optimizer.zero_grad(set_to_none=True)
            if args.compute:
                compute(args.compute)
            out = nn.functional.mse_loss(model(x), y)
            out.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            if args.step_time:
                time.sleep(args.step_time)
        loss = out.item()
        stepwatch.step(n, loss=loss)
        if args.uninstrumented and rank == 0:
            log(rank, f"step {n} loss {loss:.4f}")

        if args.eval_every and n % args.eval_every == 0:
            eval_loss = evaluate(args, model, rank)
            if rank == 0:
                log(rank, f"step {n} loss {loss:.4f} eval {eval_loss:.4f}")
        if args.ckpt_every and n % args.ckpt_every == 0:
            with stepwatch.phase("checkpoint"):
                if rank == 0:
                    write_checkpoint(args.ckpt_dir, n, net, optimizer)
                dist.barrier()  # every rank reports the checkpoint only once it is committed
            stepwatch.checkpoint_committed(f"step_{n}", n)
    dist.barrier()
    log(rank, f"done at step {args.steps}, loss {loss:.4f}")
    if rank == args.linger_rank and args.linger > 0:
        time.sleep(args.linger)  # a final save or eval nobody labeled: the others have gone


def main(argv=None):
    global stepwatch
    args = parse_args(argv)
    if args.uninstrumented:
        stepwatch = _Uninstrumented()
    # SIGTERM (the launcher stopping the job) unwinds through the finally below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.no_finish:
        train(args)
        dist.destroy_process_group()
        return 0
    ok = False
    try:
        train(args)
        ok = True
    finally:
        if stepwatch.is_initialized():
            stepwatch.finish(ok=ok)
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
