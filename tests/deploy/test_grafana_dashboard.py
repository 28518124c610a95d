# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""deploy/grafana/stepwatch-dashboard.json, read as Grafana would import it: every panel and
target names the datasource variable, ids are unique, every template variable a query uses is
defined, and every metric a query reads is one docs/metrics.md documents (the agent's families,
or Prometheus' own `up`). Whether the queries parse and return data against a real Prometheus
and agent is tests/e2e/test_agent.py's (PrometheusScrape)."""

import json
import os
import re
import unittest

SRC = os.environ.get("STEPWATCH_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "stepwatch-dashboard.json")
METRICS_MD = os.path.join(SRC, "docs", "metrics.md")

# PromQL words that are not metric names: functions, aggregations, operators, modifiers.
PROMQL_WORDS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "delta", "deriv",
    "floor", "group", "histogram_quantile", "idelta", "increase", "irate", "label_join",
    "label_replace", "last_over_time", "max", "max_over_time", "min", "min_over_time", "quantile",
    "quantile_over_time", "rate", "resets", "round", "scalar", "sort", "sort_desc", "stddev",
    "stdvar", "sum", "sum_over_time", "time", "timestamp", "topk", "vector", "and", "or",
    "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
}


def metric_names(expr):
    """The metric names an expression reads: identifiers outside label matchers, ranges,
    strings and grouping lists, that are not PromQL words."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                       # strings
    e = re.sub(r"\{[^}]*\}", "", e)                                      # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                                     # ranges
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\$\{?\w+(:\w+)?\}?", "", e)                             # template variables
    names = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", e))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r"e\d*|inf|nan", n, re.I)}


def variables_used(text):
    return set(re.findall(r"\$\{?(\w+)", text)) - {"__rate_interval", "__interval", "__range", "__all"}


class GrafanaDashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.dash = json.load(f)
        with open(METRICS_MD) as f:
            cls.metrics_md = f.read()
        cls.panels = cls.dash["panels"]
        cls.variables = {v["name"]: v for v in cls.dash["templating"]["list"]}

    def test_a_focused_dashboard_of_a_known_schema(self):
        self.assertGreaterEqual(self.dash["schemaVersion"], 36)
        self.assertTrue(self.dash["uid"])
        self.assertTrue(6 <= len(self.panels) <= 13, len(self.panels))
        for name in ("datasource", "job", "host"):
            self.assertIn(name, self.variables)
        self.assertEqual(self.variables["datasource"]["type"], "datasource")
        self.assertEqual(self.variables["datasource"]["query"], "prometheus")

    def test_ids_are_unique_and_every_panel_and_target_names_the_datasource(self):
        ids = [p["id"] for p in self.panels]
        self.assertEqual(len(ids), len(set(ids)), ids)
        ds = {"type": "prometheus", "uid": "${datasource}"}
        for p in self.panels:
            with self.subTest(panel=p["title"]):
                self.assertEqual(p.get("datasource"), ds)
                self.assertTrue(p["targets"])
                refs = [t["refId"] for t in p["targets"]]
                self.assertEqual(len(refs), len(set(refs)))
                for t in p["targets"]:
                    self.assertEqual(t.get("datasource"), ds, t["refId"])
                    self.assertTrue(t.get("expr"), t["refId"])
        for v in self.dash["templating"]["list"]:
            if v["type"] == "query":
                self.assertEqual(v["datasource"], ds, v["name"])

    def test_panels_do_not_overlap(self):
        taken = {}
        for p in self.panels:
            g = p["gridPos"]
            self.assertLessEqual(g["x"] + g["w"], 24, p["title"])
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), taken, f"{p['title']} overlaps {taken.get((x, y))}")
                    taken[(x, y)] = p["title"]

    def test_every_variable_used_is_defined(self):
        text = json.dumps([self.panels, self.dash["templating"]])
        self.assertLessEqual(variables_used(text), set(self.variables))

    def test_every_metric_is_one_the_agent_exports(self):
        seen = set()
        queries = [(p["title"], t["expr"]) for p in self.panels for t in p["targets"]]
        queries += [(v["name"], v["definition"]) for v in self.variables.values() if v["type"] == "query"]
        for where, expr in queries:
            expr = re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", expr)
            names = metric_names(expr)
            self.assertTrue(names, f"{where}: no metric in {expr!r}")
            for name in names:
                with self.subTest(where=where, metric=name):
                    documented = re.search(rf"`{re.escape(name)}(`|\{{)", self.metrics_md)
                    self.assertTrue(documented, f"{name} is not documented in docs/metrics.md")
                    seen.add(name)
        # The families the dashboard is for: state, progress, incidents, the agent, coordination,
        # the node at fault.
        for name in ("stepwatch_job_state", "stepwatch_job_step", "stepwatch_job_step_age_seconds",
                     "stepwatch_job_expected_interval_seconds", "stepwatch_job_incidents_total",
                     "stepwatch_job_actions_total", "stepwatch_agent_poll_duration_seconds",
                     "stepwatch_agent_coord_connected", "stepwatch_job_leader", "stepwatch_host_suspect",
                     "stepwatch_host_implications"):
            self.assertIn(name, seen)

    def test_the_state_panels_map_every_state_the_agent_exports(self):
        # The states docs/metrics.md lists for stepwatch_job_state (serve_metrics_test holds it to
        # the code): a state left out (as "preempted" was) shows as a bare number, or not at all.
        row = re.search(r"^\| `stepwatch_job_state` \|.*$", self.metrics_md, re.M).group(0)
        states = re.findall(r"`([a-z-]+)`", row.split("|", 5)[5])
        self.assertIn("preempted", states)
        table = [p for p in self.panels if p["type"] == "table" and "stepwatch_job_state" in p["targets"][0]["expr"]]
        self.assertEqual(len(table), 1)
        overrides = [o for o in table[0]["fieldConfig"]["overrides"] if o["matcher"]["options"] == "state"]
        mapped = [prop["value"][0]["options"] for o in overrides for prop in o["properties"]
                  if prop["id"] == "mappings"]
        self.assertEqual(len(mapped), 1)
        self.assertEqual(set(mapped[0]), set(states))
        timeline = [p for p in self.panels if p["type"] == "state-timeline"]
        self.assertEqual(len(timeline), 1)
        texts = {int(k): v["text"] for k, v in timeline[0]["fieldConfig"]["defaults"]["mappings"][0]["options"].items()}
        self.assertEqual(sorted(texts.values()), sorted(states))
        # Each state's series is multiplied by the value its text is mapped from.
        expr = timeline[0]["targets"][0]["expr"]
        coded = {name: int(n) for name, n in re.findall(r'state="([a-z-]+)"\} == 1\) \* (\d+)', expr)}
        self.assertEqual(coded, {text: n for n, text in texts.items()})

    def test_the_metric_name_reader_reads_names_only(self):
        self.assertEqual(metric_names('max by (job_id) (rate(a_total{x="b c"}[$__rate_interval]))'
                                      ' and on(instance, job_id) b_info{host=~"$host"} * 2e3'),
                         {"a_total", "b_info"})


if __name__ == "__main__":
    unittest.main()
