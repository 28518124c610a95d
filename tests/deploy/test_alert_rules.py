# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""The shipped alert rules against their documentation and their promtool tests.

promtool itself runs the tests (ctest serve_rules_test); this checks that nothing is left out:
every alert of deploy/prometheus/stepwatch-rules.yml is in docs/metrics.md's table with its
expression, `for` and severity, and tests/serve/rules_test.yml shows it firing and, for a
look-alike input, not firing; every job alert is one per job and carries the job's owner.
"""
import os
import re
import unittest

import yaml

SRC = os.environ.get("STEPWATCH_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = os.path.join(SRC, "deploy", "prometheus", "stepwatch-rules.yml")
TESTS = os.path.join(SRC, "tests", "serve", "rules_test.yml")
DOCS = os.path.join(SRC, "docs", "metrics.md")
OWNER_JOIN = "* on(job_id) group_left(owner, job_class) job_id:stepwatch_job_owner:info"


def squash(text):
    return " ".join(str(text).split())


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def rules():
    return [r for g in load(RULES)["groups"] for r in g["rules"]]


def alerts():
    return [r for r in rules() if "alert" in r]


def doc_table():
    """The Alert rules table of docs/metrics.md: {alert: (expression, for, severity)}."""
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    section = text[text.index("## Alert rules"):]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `(Stepwatch\w+)` \| `(.*)` \| (.*?) \| (\w+) \|$", line)
        if m:
            rows[m.group(1)] = (squash(m.group(2)), m.group(3), m.group(4))
    return rows


def rule_tests():
    """{alertname: [expected alerts' labels, one list per evaluation]}."""
    out = {}
    for t in load(TESTS)["tests"]:
        for a in t.get("alert_rule_test", []):
            out.setdefault(a["alertname"], []).append(
                [e.get("exp_labels", {}) for e in a.get("exp_alerts") or []])
    return out


class AlertRules(unittest.TestCase):
    def test_every_alert_is_in_the_docs_table_as_written(self):
        table = doc_table()
        self.assertEqual(sorted(table), sorted(a["alert"] for a in alerts()))
        for a in alerts():
            expr, for_, severity = table[a["alert"]]
            self.assertEqual(expr, squash(a["expr"]), a["alert"])
            self.assertEqual(for_, a.get("for", "—"), a["alert"])
            self.assertEqual(severity, a["labels"]["severity"], a["alert"])

    def test_every_alert_is_tested_firing_and_not_firing(self):
        tested = rule_tests()
        for a in alerts():
            name = a["alert"]
            self.assertIn(name, tested, f"{name} has no promtool test")
            self.assertTrue(any(tested[name]), f"{name} is never shown firing")
            self.assertTrue(any(not e for e in tested[name]), f"{name} is never shown silent")

    def test_job_alerts_are_one_per_job_with_its_owner(self):
        records = [r["record"] for r in rules() if "record" in r]
        self.assertEqual(rules()[0].get("record"), "job_id:stepwatch_job_owner:info",
                         "the owner join is evaluated before the alerts that read it")
        self.assertEqual(records, ["job_id:stepwatch_job_owner:info"])
        tested = rule_tests()
        job_alerts = [a for a in alerts() if "stepwatch_job_" in a["expr"]]
        self.assertGreaterEqual(len(job_alerts), 5)
        for a in job_alerts:
            name, expr = a["alert"], squash(a["expr"])
            self.assertTrue(expr.endswith(OWNER_JOIN), f"{name} does not join the owner: {expr}")
            self.assertIn("by (job, job_id)", expr, f"{name} is not aggregated to one per job")
            fired = [labels for e in tested[name] for labels in e]
            self.assertTrue(any("owner" in labels for labels in fired),
                            f"{name} is never shown firing with an owner")
            self.assertFalse(any("instance" in labels for labels in fired),
                             f"{name} fires per instance (per node), not per job")


if __name__ == "__main__":
    unittest.main()
