#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Writes the fuzzers' seed corpora: fuzz/corpus/<target>/ for every target of fuzz/CMakeLists.txt.

The beacons follow include/stepwatch/beacon_v1.h byte for byte (little-endian, 1024 bytes):
valid records in several states, and one of each kind of damage the reader must report. The
other targets get real examples from the tree (examples/specs, deploy/agent.toml, the log and
/proc fixtures under tests/) and small hand-written cases, in each target's input format
(fuzz/README.md). Deterministic, so the checked-in files only change when this script (or a
file it copies) does; the captured-* seeds (this machine's /proc, detection_bench traces) are
checked in as captured and never written here.
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
           incarnation=0, sample=None):
    """Returns the bytes of one record; steps is the list of committed step numbers; sample:
    (sample_seq, wait, count, hash, where) for the progress sampler block, or None."""
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
    block = bytes(128)
    if sample is not None:
        s_seq, wait, count, digest, where = sample
        block = struct.pack("<QIIQqqqqQ", s_seq, wait, 0, count, WALL0 + 20, MONO0 + 20, WALL0 + 15,
                            MONO0 + 15, digest) + fixed(where, 64)
    assert len(block) == 128
    body = (head + strings + bytes(16) + b"".join(struct.pack("<qq", *m) for m in ring) + block +
            bytes(192))
    assert len(body) == SIZE
    return body


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_seeds(out, target, seeds):
    """Writes {name: bytes or str} to OUT/target/name."""
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def tree_file(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def spec_seeds():
    seeds = {f"example-{n[:-5]}": tree_file(f"examples/specs/{n}")
             for n in sorted(os.listdir(os.path.join(ROOT, "examples/specs"))) if n.endswith(".toml")}
    seeds.update({
        "empty": "",
        "numbers-and-tables": 'expected_interval = 2.5\nexit_grace = 10\npoll_interval = "1h30m"\n'
                              '[phases]\n"ckpt:shard/1" = { budget = 90, beats_renew = true }\ncompile = "2h"\n'
                              '[runbook.collect]\nmax_bytes = 1048576\nlog_lines = 0\n',
        "users": 'users = ["alice", "1001", "svc.train-2"]\nowner = "alice@example.com"\n',
        "pagers": '[[runbook.pager]]\nurl = "http://127.0.0.1:9/hook?x=1"\n[[runbook.pager]]\nkind = "alertmanager"\n'
                  'url = "https://am.example:9093"\nretries = 0\n[[runbook.pager]]\ncommand = ["notify", "{job}"]\n'
                  '[runbook]\npreempt_command = ["scancel", "--signal=TERM", "{pgid}"]\nresume = false\n',
        "log-own-patterns": "[log]\nstep_pattern = '^it (?P<epoch>\\d+)/(?P<step>\\d+) (?:loss=(?P<loss>\\S+))?'\n"
                            "phase_start = '(?P<phase_eval>EVAL) begins|^phase (?P<phase>\\w+)'\n"
                            "phase_end = 'done'\nnoise = ['^WARN', '']\n",
        "errors": 'grace_intervals = 0.5\nslow_factor = "x"\nwindow = 1\n[learn]\nwindow = 1\n'
                  '[checkpoint]\nmarker = "../x"\nsource = "markr"\n[[runbook.pager]]\nurl = "ftp://x"\n',
        "syntax-error": 'job = "unterminated\n[log\n',
    })
    return seeds


def agent_config_seeds():
    return {
        "deploy-agent": tree_file("deploy/agent.toml"),
        "empty": "",
        "every-key": 'beacon_roots = ["/dev/shm/stepwatch", "/run/stepwatch"]\npoll_interval = "500ms"\n'
                     'state_dir = "/var/lib/sw"\nlisten = "[::1]:0"\nspecs_dir = "/etc/sw/jobs"\nretire_after = 120\n'
                     'gpu = false\nnvml_lib = "/opt/libnvidia-ml.so.1"\nproc_root = "/fake/proc"\n'
                     'preempt_jobs = ["pretrain-*", "job-?", "exact.id"]\n',
        "bounds": 'max_jobs_per_user = 1\nincidents_per_user_per_hour = 1000000\nlog_lines_per_user_per_minute = 120\n'
                  'keep_history = "1h"\nmax_store_size = "1MiB"\n',
        "beyond-loopback": 'listen = "0.0.0.0:9465"\ntoken_file = "/etc/stepwatch/token"\n',
        "errors": 'listen = "localhost"\npoll_interval = "1ms"\nbeacon_roots = ["relative"]\npolling = 1\n',
    }


def log_contract_seeds():
    """Byte 0: preset index (log_presets() order) | 0x80 with own patterns on the first line."""
    presets = ["none", "plain", "huggingface", "lightning", "megatron", "torchtitan", "nemo", "deepspeed", "auto"]
    seeds = {}
    for name in ["plain", "huggingface", "lightning", "megatron", "torchtitan"]:
        text = tree_file(f"tests/probe/data/{name}.txt")[:6000]
        seeds[f"{name}-log"] = bytes([presets.index(name)]) + text
        seeds[f"auto-{name}-log"] = bytes([presets.index("auto")]) + text[:3000]
    seeds["deepspeed"] = bytes([presets.index("deepspeed")]) + (
        b"[Rank 0] step=35, skipped=0, lr=[0.0001], mom=[(0.9, 0.999)]\n"
        b"steps: 70 loss: 2.1486 iter time (s): 0.521 samples/sec: 61.4\n"
        b"[2024-05-01 12:00:00] Checkpoint global_step70 is about to be saved!\n")
    seeds["nemo"] = bytes([presets.index("nemo")]) + (
        b"[NeMo I 2024-05-01 12:00:00 train:12] Starting\n"
        b"Epoch 0:  10%|#         | 10/100 [00:05<00:45, reduced_train_loss=3.21, v_num=0]\n"
        b"Training epoch 0, iteration 9/99 | lr: 1e-4 | reduced_train_loss: 11.02 |\n"
        b"Validation: iteration 1/10\n")
    seeds["own-patterns"] = bytes([0x80 | presets.index("plain")]) + (
        b"^it (?P<epoch>\\d+)/(?P<step>\\d+)(?: loss=(?P<loss>\\S+))?\t(?P<phase_eval>EVAL) begins\tEVAL done\t^WARN\n"
        b"it 0/1 loss=2.5\nit 0/2 loss=nan\nEVAL begins\nWARN it 0/3\nEVAL done\nit 1/1\r it 1/2 loss=-inf\n"
        b"\x00\nit 0/999\nit 1/1\n")
    seeds["own-bad-pattern"] = bytes([0x80 | presets.index("auto")]) + b"step (\\d+\t(?P<phase_>x)\n"
    seeds["escapes-and-bars"] = bytes([presets.index("huggingface")]) + (
        b" 10%|#         | 10/100 [00:01<00:09]\r 11%|#         | 11/100 [00:01<00:09]\x1b[A\x1b[2K\n"
        b"{'loss': 2.3456, 'learning_rate': 1e-05, 'epoch': 0.1}\n***** Running Evaluation *****\n"
        b"\x1b]0;title\x07{'eval_loss': 1.5}\n")
    seeds["long-line"] = bytes([presets.index("plain")]) + b"\x01\xe0step 7 loss 1.5 " + b"\nstep 8\n"
    return seeds


def proc_seeds():
    """Byte 0: 0 stat, 1 a process dir (stat, io, wchan, task stats, NUL-separated), 2 net/tcp,
    3 net/tcp6, 4 status."""
    data = "tests/probe/data/proc"
    seeds = {}
    for pid in ["1", "100", "101", "300", "400"]:
        seeds[f"stat-{pid}"] = b"\x00" + tree_file(f"{data}/{pid}/stat")
    for pid in ["101", "102"]:
        # As process 4242, the pid of the fake tree proc_fuzz.cpp writes.
        stat = b"4242" + tree_file(f"{data}/{pid}/stat")[len(pid):]
        parts = [stat, tree_file(f"{data}/{pid}/io"), tree_file(f"{data}/{pid}/wchan")]
        tasks = sorted(os.listdir(os.path.join(ROOT, data, pid, "task")))
        parts += [tree_file(f"{data}/{pid}/task/{t}/stat") for t in tasks]
        seeds[f"process-{pid}"] = b"\x01" + b"\x00".join(parts)
    seeds["process-no-io-wchan-0"] = b"\x01" + b"4242" + tree_file(f"{data}/103/stat")[3:] + b"\x00\x000"
    seeds["process-other-pid"] = b"\x01" + tree_file(f"{data}/101/stat") + b"\x00" + tree_file(f"{data}/101/io")
    seeds["process-empty-stat"] = b"\x01"
    seeds["tcp-fixture"] = b"\x02" + tree_file("tests/probe/data/proc/net/tcp")
    seeds["tcp6-fixture"] = b"\x03" + tree_file("tests/probe/data/proc/net/tcp6")
    seeds["status-sigcgt"] = b"\x04" + (b"Name:\tpython3\nState:\tS (sleeping)\nSigBlk:\t0000000000000000\n"
                                        b"SigIgn:\t0000000001001000\nSigCgt:\t0000000180004202\nCapEff:\t0000000000000000\n")
    return seeds


def trace_seeds():
    header = ('{"type":"header","version":1,"job":"job-1","local_host":"node-1","poll_ns":1000000000,'
              '"scenario":"fuzz","spec_toml":"expected_interval = \\"1s\\"\\n",'
              '"truth":{"stall":true,"stall_start_wall_ns":1700000010000000000,"allowed_ns":5000000000,'
              '"interval_ns":1000000000,"culprits":[1],"note":"rank 1 hangs"}}')
    rank = ('{{"rank":{r},"world_size":2,"local_rank":{r},"job":"job-1","host":"node-1","pid":{pid},'
            '"pid_start_ticks":5010,"incarnation":0,"status":"running","source":"beacon",'
            '"created":[1700000000000000000,1000000000000],"step_count":{n},"step":{n},'
            '"step_at":[{t},{m}],"phase":"train","phase_since":[1700000000000000000,1000000000000],'
            '"phase_count":1,"beat_count":0,"loss":{loss},"loss_at":[{t},{m}],"recent":[[{n},{m}]],'
            '"sample":{{"count":{n},"at":[{t},{m}],"moved_at":[{t},{m}],"hash":"00ff00ff00ff00ff",'
            '"wait":"collective","where":"all_reduce (distributed_c10d.py:1536)"}}}}')
    def obs(i, loss):
        t, m = 1700000000000000000 + i * 10**9, 1000000000000 + i * 10**9
        ranks = ",".join(rank.format(r=r, pid=4242 + r, n=i, t=t, m=m, loss=loss) for r in range(2))
        return (f'{{"type":"obs","now":[{t},{m}],"ranks":[{ranks}],"local_host":"node-1","world_size":2,'
                f'"procs":[{{"rank":0,"alive":true,"same_process":true,"state":"S","threads_in_d":0,"wchan":"futex_wait_queue",'
                f'"cpu_delta_ns":1000000,"io_delta_bytes":4096,"main_cpu_delta_ns":500,"ctx_switches_delta":3}},{{"rank":1,"alive":true,"same_process":true,"state":"D",'
                f'"threads_in_d":2,"wchan":"nfs_wait","exit_code":null}}],'
                f'"gpus":[{{"rank":0,"sm_util_pct":97.5,"power_w":350.25,"mem_used_bytes":42949672960}},{{"rank":1}}],'
                f'"log":{{"last_line_wall_ns":{t},"lines_total":{i},"last_step":{i},"last_step_line_wall_ns":{t}}}}}')
    verdict = '{"type":"verdict","state":"stalled","cause":"io","summary":"rank 1 in D"}'
    return {
        "labeled": "\n".join([header, obs(1, 2.5), obs(2, '"nan"'), verdict, obs(3, '"-inf"')]) + "\n",
        "problems": "\n".join([obs(2, 1.0), obs(1, 1.0), header, header, '{"type":"obs","now":[1,2],"ranks":[{"rank":0}]}',
                                '{"type":"header","version":9}', "not json", "", '{"type":"bogus"}']),
        "minimal": '{"type":"obs","now":[1,0],"ranks":[]}',
    }


def coord_seeds():
    """Byte 0 picks the key (coord_fuzz.cpp), the rest is the value: each record as an agent
    writes it, and the review's forgeries (E1-E12 in reviews/reliability.md), cut short."""
    obs = ('{"type":"obs","now":[1700000000000000000,1000000000000],"local_host":"a","world_size":2,'
           '"ranks":[{"job":"j","rank":0,"world_size":2,"step":41,"step_count":42,"pid":4242}]}')
    records = {
        "summary": (0, '{"v":1,"node":"a","poll_seq":7,"incarnation":0,"obs":' + obs + '}'),
        "summary-renamed": (0, '{"v":1,"node":"vm","poll_seq":7,"incarnation":0,"obs":' + obs + '}'),
        "summary-steady": (0, '{"v":1,"node":"a","poll_seq":7,"incarnation":0,"steady_ns":12000000000,'
                           '"reads_steady":true,"obs":' + obs + '}'),
        "summary-deep": (0, '{"v":1,"node":"a","poll_seq":1,"incarnation":0,"obs":{"type":"obs","deep":'
                         + "[" * 200 + "]" * 200 + "}}"),
        "order": (1, '{"incident":7,"incarnation":0,"collect":true,"by":"a","fence":5,"at_ns":1}'),
        "order-forged": (1, '{"incident":999,"incarnation":0,"collect":false,"by":"attacker","at_ns":0}'),
        "order-garbage": (1, "x"),
        "report": (2, '{"node":"a","ok":true,"refused":"","artifact":"","summary":"1 of 1 gone",'
                      '"processes":[{"pid":4242,"label":"rank 0","gone":true,"describe":"exited"}],"at_ns":1}'),
        "report-other-node": (2, '{"node":"zz","ok":true}'),
        "roster": (3, '{"incarnation":0,"nodes":{"a":[0],"b":[1]}}'),
        "view": (4, '{"leader":"a","at_wall_ns":1,"verdict":{"state":"healthy","cause":"none","ranks":[]},'
                    '"obs":' + obs + ',"nodes":[{"node":"a","leader":true,"ranks":[0]}]}'),
        "view-compact": (4, '{"leader":"a","at_wall_ns":1,"verdict":{"state":"stalled","cause":"collective",'
                            '"ranks":[]},"obs":{"now":[1,1],"ranks":[]},"nodes":[],"compact":true}'),
        "incarnation": (5, '{"incarnation":1,"resume_from":"step_20","incident":7,"by":"a","at_ns":1}'),
        "launcher": (6, '{"node":"a","pid":1,"incarnation":0,"started_at_ns":1,"scheduler":"slurm",'
                        '"scheduler_job":"4242","scheduler_restarts":0}'),
        "launcher-option": (6, '{"node":"a","scheduler":"slurm","scheduler_job":"--state=RUNNING"}'),
        "incident": (7, '{"job":"j","incarnation":0,"opened_at_ns":1,"state":"stalled","cause":"io",'
                        '"summary":"s","opened_by":"a","actions":[],"paged_at_ns":1,"acked_at_ns":1}'),
        "epoch": (8, '{"epoch":1800000000000,"by":"a"}'),
        "epoch-forged": (8, '{"epoch":9000000000001}'),
        "incident-over-open": (10, '{"state": 7, "page": [1, 2]}'),
        "incident-over-open-id": (10, '{"job":"j","incarnation":0,"opened_at_ns":1,"state":"stalled",'
                                      '"cause":"io","opened_by":"b","actions":[],"epoch":1800000000000,'
                                      '"id":1800000000000999}'),
        "incident-epoch": (7, '{"job":"j","incarnation":0,"opened_at_ns":1,"state":"stalled","cause":"io",'
                              '"summary":"s","opened_by":"a","actions":[],"epoch":1800000000000}'),
    }
    return {name: bytes([pick]) + text.encode() for name, (pick, text) in records.items()}


def http_seeds():
    """Byte 0: even the ack endpoint, odd the agent API; the rest is sent as is."""
    auth = "Authorization: Bearer fuzz-token-5c1d\r\n"
    body = '{"by":"alice","note":"looking"}'
    def post(path, headers="", b=body):
        return f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:9465\r\n{headers}Content-Type: application/json\r\n" \
               f"Content-Length: {len(b)}\r\n\r\n{b}"
    ack, api = "\x00", "\x01"
    return {
        "ack-ok": ack + post("/ack", auth),
        "ack-no-token": ack + post("/ack"),
        "ack-wrong-token": ack + post("/ack", "Authorization: Bearer nope\r\n"),
        "ack-two-tokens": ack + post("/ack", auth + auth),
        "ack-chunked": ack + "POST /ack HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
                       "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "ack-body-before-token": ack + "POST /ack HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{\"by\":",
        "ack-foreign-origin": ack + post("/ack", auth + "Origin: http://evil.example\r\n"),
        "ack-status": ack + "GET /status HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "ack-healthz-head": ack + "HEAD /healthz HTTP/1.1\r\n\r\n",
        "ack-put": ack + "PUT /ack HTTP/1.1\r\n" + auth + "Content-Length: 0\r\n\r\n",
        "ack-rebinding": ack + "GET /status HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        "ack-bad-body": ack + post("/ack", auth, '{"by": 7}'),
        "ack-expect": ack + "POST /ack HTTP/1.1\r\n" + auth + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
        "ack-percent-token": ack + post("/ack", "Authorization: Bearer%20fuzz-token-5c1d\r\n"),
        "api-jobs": api + "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:9465\r\nAccept: application/json\r\n\r\n",
        "api-job": api + "GET /api/v1/jobs/fuzz-job HTTP/1.1\r\nHost: [::1]:9465\r\n\r\n",
        "api-incidents": api + "GET /api/v1/incidents?job=fuzz-job&limit=5 HTTP/1.1\r\n\r\n",
        "api-ack-ok": api + post("/api/v1/jobs/fuzz-job/ack", "authorization: bearer fuzz-token-5c1d\r\n"),
        "api-ack-no-token": api + post("/api/v1/jobs/fuzz-job/ack"),
        "api-ack-unknown-job": api + post("/api/v1/jobs/nope/ack", auth),
        "api-delete": api + "DELETE /api/v1/jobs/fuzz-job HTTP/1.1\r\n" + auth + "Content-Length: 0\r\n\r\n",
        "api-options": api + "OPTIONS /healthz HTTP/1.1\r\n\r\n",
        "api-dashboard-gzip": api + "GET / HTTP/1.1\r\nAccept-Encoding: gzip, br\r\n\r\n",
        "api-unknown-path": api + "GET /nope?x=%41 HTTP/1.1\r\n\r\n",
        "api-bad-request-line": api + "GET /api/v1/jobs HTTP/9.9\r\n\r\n",
        "api-http10": api + "GET /healthz HTTP/1.0\r\n\r\n",
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    b_dir, j_dir = os.path.join(out, "beacon"), os.path.join(out, "jsonl")
    os.makedirs(b_dir, exist_ok=True)
    os.makedirs(j_dir, exist_ok=True)
    write_seeds(out, "spec", spec_seeds())
    write_seeds(out, "agent_config", agent_config_seeds())
    write_seeds(out, "log_contract", log_contract_seeds())
    write_seeds(out, "proc", proc_seeds())
    write_seeds(out, "trace", trace_seeds())
    write_seeds(out, "http", http_seeds())
    write_seeds(out, "coord", coord_seeds())

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
        "valid-sampler": beacon(steps=[1, 2], sample=(4, 1, 9, 0xFEEDFACE12345678, "all_reduce (c10d.py:1536)")),
        "sampler-torn": beacon(steps=[1], sample=(5, 2, 3, 7, "synchronize (x.py:1)")),
        "sampler-bad-wait": beacon(steps=[1], sample=(2, 9, 3, 7, "x")),
        "sampler-unterminated": beacon(steps=[1], sample=(2, 0, 3, 7, b"w" * 64)),
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
