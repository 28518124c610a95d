# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Multi-node under Kubernetes, at the process level (docs/kubernetes.md, "Multi-node: the exit
status of every pod"): no cluster here, so the test plays the controller. Two real `stepwatch
agent` nodes and one real etcd as in test_multinode; each pod's part is the real 2-rank PyTorch
trainer under its own `stepwatch run --coord`, with KUBERNETES_SERVICE_HOST set and
STEPWATCH_INCARNATION from the JobSet's restart-attempt label. The spec says resume_owner =
"kubernetes".

- The leader preempts the stalled job once and every pod's launcher exits 175 (the requeue code:
  the JobSet restarts the whole set once). The controller's restart (every pod again, restart
  attempt 1) resumes incarnation 1 from the newest committed checkpoint on both pods.
- runbook.resume = false: every pod's launcher exits 75, which the pod failure policy turns into
  a stop of the whole JobSet.
- A restart the leader did not order (the controller recreated every pod, restart attempt 1,
  while etcd says 0): the launchers start incarnation 1, not a second incarnation 0, and both
  resume from the newest checkpoint every rank committed.
"""

import json
import os
import signal
import subprocess
import time
import unittest

from test_multinode import JOB, TwoLaunchers  # noqa: E402

POD = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}


def attempt(n):
    """A pod's env at JobSet restart attempt n."""
    return dict(POD, STEPWATCH_INCARNATION=str(n))


class KubernetesMultiNode(TwoLaunchers):
    RUNBOOK = 'resume_owner = "kubernetes"\n'

    def exits(self, launchers, timeout=90):
        """Each pod's launcher's exit status."""
        out = {}
        for name, p in launchers.items():
            try:
                out[name] = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.fail(f"the launcher on {name} did not exit: {self.log_of(name)[-3000:]}")
        return out

    def restart_every_pod(self, n):
        """The controller: every pod again, at restart attempt n."""
        return {name: self.start_launcher(name, self.port, env_extra=attempt(n)) for name in "ab"}

    def test_every_pod_exits_175_once_and_the_whole_set_resumes_from_the_checkpoint(self):
        rx = self.receiver
        launchers = self.launch("30s", runbook=self.RUNBOOK, env=attempt(0))
        self.wait_for("the stall's page", lambda: rx.pages, timeout=90)
        self.assertEqual([(c["rank"], c["host"]) for c in rx.pages[0]["culprits"]], [(1, "b")], rx.pages[0])
        rcs = self.exits(launchers)
        self.assertEqual(rcs, {"a": 175, "b": 175}, {n: self.log_of(n)[-2000:] for n in rcs})
        for n in "ab":
            self.assertIn("kubernetes restarts the job on its exit status", self.log_of(n))
            self.assertNotIn("launched incarnation 1", self.log_of(n))
        inc = self.closed_incident(self.nodes["a"])
        self.assertIn("its launchers exit with 175 for Kubernetes to restart it as incarnation 1 from step_40",
                      inc[0]["resolution"])

        # The JobSet restarts the whole set once: every pod at restart attempt 1.
        self.finished(self.restart_every_pod(1))
        for n in "ab":
            self.assertIn("launched incarnation 1 resuming from step_40", self.log_of(n))
        self.assertEqual(len(rx.pages), 1, rx.pages)
        done = self.wait_for("the job finished on the leader", lambda: (
            lambda j: j if j["state"] == "finished" else None)(self.nodes["a"].job(JOB)), timeout=20)
        self.assertEqual({r["beacon"]["incarnation"] for r in done["ranks"]}, {1})

    def test_resume_false_exits_every_pod_with_75(self):
        rx = self.receiver
        launchers = self.launch("30s", runbook=self.RUNBOOK + "resume = false\n", env=attempt(0))
        self.wait_for("the stall's page", lambda: rx.pages, timeout=90)
        rcs = self.exits(launchers)
        self.assertEqual(rcs, {"a": 75, "b": 75}, {n: self.log_of(n)[-2000:] for n in rcs})
        for n in "ab":
            self.assertIn("the job's leader stopped it (runbook.resume = false), and Kubernetes is not to "
                          "restart it", self.log_of(n))
            self.assertIn("exiting with 75, the status the scheduler stops the job on", self.log_of(n))
        inc = self.closed_incident(self.nodes["a"])
        self.assertIn("runbook.resume = false", inc[0]["resolution"])
        self.assertIn("its launchers exit with 75 so that Kubernetes does not restart it", inc[0]["resolution"])
        self.assertEqual(len(rx.pages), 1, rx.pages)

    def test_a_restart_the_leader_did_not_order_is_the_next_incarnation_from_the_newest_checkpoint(self):
        """Every pod deleted (SIGTERM to each launcher, passed to its rank) after step_20 was
        committed, and recreated by the controller at restart attempt 1, etcd still at incarnation
        0 with no resume point: incarnation 1 starts on both pods, and both resume from step_20,
        the newest checkpoint every rank committed, as the leader recorded it (issue 30; before,
        both started from scratch)."""
        # The agents page the ranks the deletion ends, and preempt nothing: the restart is the
        # controller's alone, however long it takes (a leader that moved the incarnation first
        # would have ordered it).
        launchers = self.launch("30s", runbook=self.RUNBOOK, env=attempt(0),
                                spec_extra="[auto_preempt]\nenabled = false\n")
        key = f"/stepwatch/v1/jobs/{JOB}/checkpoint"
        self.wait_for("step_20 recorded as committed by every rank", lambda: (
            lambda v: v if v and json.loads(v)["step"] >= 20 else None)(self.etcd.get(key)), timeout=60)
        for p in launchers.values():
            p.send_signal(signal.SIGTERM)
        self.assertEqual(set(self.exits(launchers, 30).values()), {128 + signal.SIGTERM})
        # What the leader recorded by the time every rank was gone: step_20, or step_40 when the
        # ranks got there first (both before the hang at step 50).
        recorded = json.loads(self.etcd.get(key))
        self.assertIn((recorded["id"], recorded["step"]), {("step_20", 20), ("step_40", 40)}, recorded)
        self.assertEqual((recorded["by"], recorded["incarnation"]), ("a", 0), recorded)
        newest = recorded["id"]
        time.sleep(1.5)  # the launchers' keys have gone with their leases
        self.finished(self.restart_every_pod(1), resumed_from=newest)
        moved = [n for n in "ab" if "Kubernetes restarted the job (STEPWATCH_INCARNATION=1) without it being "
                 "recorded" in self.log_of(n)]
        self.assertTrue(moved, {n: self.log_of(n)[-2000:] for n in "ab"})
        for n in "ab":
            self.assertIn(f"incarnation 1 resumes from {newest} (step {recorded['step']}), the newest checkpoint "
                          "every rank committed (as a recorded it in incarnation 0), not from scratch as the "
                          "incarnation's record says", self.log_of(n))
            self.assertIn(f"launched incarnation 1 resuming from {newest}", self.log_of(n))
            self.assertNotIn("launched incarnation 0 resuming", self.log_of(n))

if __name__ == "__main__":
    unittest.main()
