# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""What the multi-node end-to-end tests and the failover benchmark share: a real etcd (Debian's
/usr/bin/etcd) on free loopback ports with its data in /dev/shm, that can be killed and started
again on the same data, and a TCP forwarder whose connections can be cut (a network partition
between one node's agent and etcd)."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

ETCD = "/usr/bin/etcd"


def _two_free_ports():
    # Both bound before either is closed: two distinct ports.
    a, b = socket.socket(), socket.socket()
    try:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        return a.getsockname()[1], b.getsockname()[1]
    finally:
        a.close()
        b.close()


class Etcd:
    """One etcd member. start() waits until GET /health says true; kill() is SIGKILL (no clean
    shutdown, as a crashed etcd); start() again reuses the ports and the data directory."""

    def __init__(self):
        if not os.access(ETCD, os.X_OK):
            raise RuntimeError(f"{ETCD} is missing: scripts/setup-deps.sh installs etcd-server")
        base = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self.dir = tempfile.mkdtemp(prefix="stepwatch-etcd-", dir=base)
        self.proc = None
        for _ in range(5):
            self.client_port, self.peer_port = _two_free_ports()
            self.start()
            if self.proc is not None:
                return
            # A port was taken between choosing it and etcd's bind: new ports, new data.
            shutil.rmtree(os.path.join(self.dir, "data"), True)
        log = self.log_tail()
        self.close()
        raise RuntimeError(f"etcd did not start; its log ends:\n{log}")

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, timeout=10):
        peer = f"http://127.0.0.1:{self.peer_port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}  # ETCD_* are flags too
        with open(os.path.join(self.dir, "log"), "ab") as log:
            self.proc = subprocess.Popen(
                [ETCD, "--name=t", f"--data-dir={self.dir}/data", f"--listen-client-urls={self.endpoint}",
                 f"--advertise-client-urls={self.endpoint}", f"--listen-peer-urls={peer}",
                 f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=t={peer}",
                 "--heartbeat-interval=10", "--election-timeout=100", "--log-level=error"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.proc = None
                return False
            try:
                with urllib.request.urlopen(self.endpoint + "/health", timeout=0.5) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return True
            except (OSError, ValueError):
                pass
            time.sleep(0.02)
        self.kill()
        return False

    def kill(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def get(self, key):
        """The value of `key` through the JSON gateway (None: absent)."""
        body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
        req = urllib.request.Request(self.endpoint + "/v3/kv/range", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            kvs = json.loads(r.read()).get("kvs", [])
        return base64.b64decode(kvs[0]["value"]).decode() if kvs else None

    def log_tail(self, n=2000):
        try:
            with open(os.path.join(self.dir, "log"), errors="replace") as f:
                return f.read()[-n:]
        except OSError:
            return ""

    def close(self):
        self.kill()
        shutil.rmtree(self.dir, True)


class Forwarder:
    """127.0.0.1:<port> -> target port, both ways, one thread per direction. cut() closes every
    connection and refuses new ones (the listener stays bound, so restore() needs no new port);
    restore() forwards again."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []
        self.is_cut = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                refuse = self.is_cut or self.closed
            if refuse:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()  # RST: as a refused connection
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=2)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.is_cut = True
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def restore(self):
        with self.lock:
            self.is_cut = False

    def close(self):
        self.closed = True
        self.cut()
        self.listener.close()
