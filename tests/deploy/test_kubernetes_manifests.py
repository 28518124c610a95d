# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes/*.yaml, checked without a cluster (docs/kubernetes.md, "How these examples
are checked"):

1. Every document validates against its published schema (deploy/kubernetes/schemas/, README
   there): the JobSet and PyTorchJob CRDs' openAPIV3Schema, the ConfigMap's JSON Schema. The CRD
   schemas list their fields but do not forbid others (the API server prunes unknown fields, or
   rejects them under strict field validation); here, as under strict validation, an unknown
   field is an error.
2. What the API server checks in Go or CEL and the schemas cannot say: podFailurePolicy rules,
   JobSet rule names, restartPolicy values.
3. stepwatch's contract (docs/run.md, "Exit status"): 75 and 76 stop, [kubernetes]
   requeue_exit_code (128-255) restarts, the incarnation comes from the JobSet's restart-attempt
   label, and the embedded spec is one `stepwatch check-spec` accepts (with STEPWATCH_BIN).
4. The multi-node JobSet (jobset-multinode.yaml): the same exit statuses through `stepwatch run
   --coord`, an agent sidecar that sees the trainer's processes and beacons, and an agent
   configuration `stepwatch agent --check-config` accepts.

Negative tests prove the checks bite: a typo'd field, a wrong type, a bad enum value.
Run: cd tests/deploy && STEPWATCH_SOURCE_DIR=../.. /usr/bin/python3 -m unittest -v test_kubernetes_manifests
"""

import copy
import json
import os
import re
import subprocess
import tempfile
import tomllib
import unittest

import jsonschema
import yaml

SRC = os.environ.get("STEPWATCH_SOURCE_DIR",
                     os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
K8S = os.path.join(SRC, "deploy", "kubernetes")
SCHEMAS = os.path.join(K8S, "schemas")
MANIFESTS = {name: os.path.join(K8S, name) for name in ("jobset.yaml", "pytorchjob.yaml")}
MULTINODE = os.path.join(K8S, "jobset-multinode.yaml")  # agents and etcd: MultiNodeJobSet

# (apiVersion, kind) -> schema file: only the kinds the examples use.
SCHEMA_FILES = {
    ("v1", "ConfigMap"): "v1_configmap.json",
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): "jobset.x-k8s.io_v1alpha2_jobset.json",
    ("kubeflow.org/v1", "PyTorchJob"): "kubeflow.org_v1_pytorchjob.json",
}

STOP_CODES = (75, 76)                       # docs/run.md: preempted without resume; budget spent
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
SPEC_PATH = "/etc/stepwatch/job.toml"
BEACON_DIR = "/dev/shm/stepwatch"


def strict(schema):
    """The schema with unknown fields made errors: every object schema that lists its
    properties and says nothing of others gets additionalProperties: false (what the API
    server's strict field validation does with a structural schema), except where
    x-kubernetes-preserve-unknown-fields keeps them. x-kubernetes-int-or-string without an
    explicit anyOf accepts an integer or a string. Other x-kubernetes-* keys (list types, CEL
    validations) are ignored: jsonschema does not know them."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    if out.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    return out


def load_json(name):
    with open(os.path.join(SCHEMAS, name)) as f:
        return json.load(f)


def object_meta():
    """ObjectMeta as the ConfigMap schema has it (strict): a CRD's schema leaves the top-level
    metadata open ({type: object}) because the API server checks it for every kind."""
    return load_json("v1_configmap.json")["properties"]["metadata"]


def validator_for(api_version, kind, make_strict=True):
    key = (api_version, kind)
    if key not in SCHEMA_FILES:
        raise KeyError(f"no schema for apiVersion {api_version}, kind {kind}")
    schema = load_json(SCHEMA_FILES[key])
    if key != ("v1", "ConfigMap"):
        schema = copy.deepcopy(schema)
        schema["properties"]["metadata"] = object_meta()
        # apiVersion and kind are free strings in a CRD's schema: pin them to this kind.
        schema["properties"]["apiVersion"] = {"type": "string", "enum": [api_version]}
        schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
        schema["required"] = sorted(set(schema.get("required", [])) | {"apiVersion", "kind"})
        if make_strict:
            schema = strict(schema)
    schema.pop("$schema", None)  # the draft is chosen here, not by the file
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def schema_errors(doc, make_strict=True):
    v = validator_for(doc.get("apiVersion"), doc.get("kind"), make_strict)
    return sorted("/".join(str(p) for p in e.absolute_path) + ": " + e.message
                  for e in v.iter_errors(doc))


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def by_kind(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def jobset_job_specs(jobset):
    return [rj["template"]["spec"] for rj in jobset["spec"]["replicatedJobs"]]


def pytorch_pod_templates(pj):
    return [rs["template"] for rs in pj["spec"]["pytorchReplicaSpecs"].values()]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def spec_toml(docs):
    cm = by_kind(docs, "ConfigMap")
    return cm["data"]["job.toml"]


def k8s_semantic_problems(doc):
    """What the API server (and the JobSet webhook) check beyond the schema, for the fields
    these examples use: k8s.io/kubernetes pkg/apis/batch/validation (podFailurePolicy),
    JobSet's webhook (rule names), the PyTorchJob webhook (replica types, restart policies)."""
    problems = []
    if doc["kind"] == "JobSet":
        names = [r["name"] for r in doc["spec"].get("failurePolicy", {}).get("rules", [])]
        for n in names:
            if not re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", n):
                problems.append(f"failurePolicy rule name {n!r} is not a valid rule name")
        if len(set(names)) != len(names):
            problems.append("failurePolicy rule names are not unique")
        for job in jobset_job_specs(doc):
            pfp = job.get("podFailurePolicy")
            if pfp is None:
                continue
            if job["template"]["spec"].get("restartPolicy") != "Never":
                problems.append("podFailurePolicy needs the pod template's restartPolicy: Never")
            for i, rule in enumerate(pfp["rules"]):
                if rule["action"] not in ("FailJob", "FailIndex", "Ignore", "Count"):
                    problems.append(f"podFailurePolicy rule {i}: unknown action {rule['action']!r}")
                exit_codes, conditions = rule.get("onExitCodes"), rule.get("onPodConditions")
                if (exit_codes is None) == (not conditions):
                    problems.append(f"podFailurePolicy rule {i}: exactly one of onExitCodes, "
                                    "onPodConditions")
                if exit_codes:
                    vals = exit_codes["values"]
                    if exit_codes["operator"] not in ("In", "NotIn"):
                        problems.append(f"podFailurePolicy rule {i}: operator must be In or NotIn")
                    if not vals or vals != sorted(set(vals)):
                        problems.append(f"podFailurePolicy rule {i}: values must be non-empty, "
                                        "sorted and unique")
                    if exit_codes["operator"] == "In" and 0 in vals:
                        problems.append(f"podFailurePolicy rule {i}: 0 cannot be used with In")
                    names = {c["name"] for c in job["template"]["spec"]["containers"]}
                    if exit_codes.get("containerName") not in (None, *names):
                        problems.append(f"podFailurePolicy rule {i}: no container "
                                        f"{exit_codes['containerName']!r}")
    if doc["kind"] == "PyTorchJob":
        for rtype, rs in doc["spec"]["pytorchReplicaSpecs"].items():
            if rtype not in ("Master", "Worker"):
                problems.append(f"pytorchReplicaSpecs: unknown replica type {rtype!r}")
            if rs.get("restartPolicy") not in (None, "Always", "OnFailure", "Never", "ExitCode"):
                problems.append(f"{rtype}: unknown restartPolicy {rs['restartPolicy']!r}")
    return problems


def comment_block(path, key):
    """The YAML in a commented-out block that starts with `#   KEY:`, uncommented."""
    with open(path) as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*#\s+)" + re.escape(key) + r":\s*$", line)
        if not m:
            continue
        prefix, block = m.group(1), [line[len(m.group(1)):]]
        for nxt in lines[i + 1:]:
            if not nxt.startswith(prefix + " "):
                break
            block.append(nxt[len(prefix):])
        return yaml.safe_load("\n".join(block))
    raise AssertionError(f"{path}: no commented-out {key}: block")


def duration_s(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|m|min|h)", text)
    assert m, f"unexpected duration {text!r}"
    return float(m.group(1)) * {"s": 1, "m": 60, "min": 60, "h": 3600}[m.group(2)]


class Schemas(unittest.TestCase):
    """Every document in the examples against its published schema."""

    def test_every_document_validates(self):
        for name, path in MANIFESTS.items():
            docs = load_docs(path)
            self.assertEqual(sorted(d["kind"] for d in docs),
                             sorted(["ConfigMap", "JobSet" if "jobset" in name else "PyTorchJob"]))
            for doc in docs:
                with self.subTest(manifest=name, kind=doc["kind"]):
                    self.assertEqual(schema_errors(doc), [])
                    self.assertEqual(k8s_semantic_problems(doc), [])

    def test_the_suspect_host_hint_is_valid_where_it_goes(self):
        # The commented-out node affinity, put in the pod spec, still validates.
        for name, path in MANIFESTS.items():
            with self.subTest(manifest=name):
                hint = comment_block(path, "affinity")
                terms = hint["affinity"]["nodeAffinity"][
                    "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                expr = terms[0]["matchExpressions"][0]
                self.assertEqual((expr["key"], expr["operator"]), ("kubernetes.io/hostname", "NotIn"))
                doc = copy.deepcopy(next(d for d in load_docs(path) if d["kind"] != "ConfigMap"))
                pods = ([j["template"] for j in jobset_job_specs(doc)] if doc["kind"] == "JobSet"
                        else pytorch_pod_templates(doc))
                for pod in pods:
                    pod["spec"].update(hint)
                self.assertEqual(schema_errors(doc), [])


class Negative(unittest.TestCase):
    """Broken copies of the examples must fail: the checks above are not vacuous."""

    @classmethod
    def setUpClass(cls):
        cls.jobset_docs = load_docs(MANIFESTS["jobset.yaml"])
        cls.pytorch_docs = load_docs(MANIFESTS["pytorchjob.yaml"])

    def jobset(self):
        return copy.deepcopy(by_kind(self.jobset_docs, "JobSet"))

    def pytorchjob(self):
        return copy.deepcopy(by_kind(self.pytorch_docs, "PyTorchJob"))

    def assertRejected(self, doc, fragment):
        errors = schema_errors(doc)
        self.assertTrue(errors, "a broken manifest validated")
        self.assertTrue(any(fragment in e for e in errors), errors)

    def test_typo_in_failure_policy(self):
        js = self.jobset()
        fp = js["spec"]["failurePolicy"]
        fp["maxRestart"] = fp.pop("maxRestarts")
        self.assertRejected(js, "'maxRestart' was unexpected")

    def test_the_published_crd_alone_lets_the_typo_through(self):
        # Why strict() exists: the CRD schema lists fields but does not close objects, so
        # plain JSON Schema validation would accept the typo (the API server would prune it).
        js = self.jobset()
        fp = js["spec"]["failurePolicy"]
        fp["maxRestart"] = fp.pop("maxRestarts")
        self.assertEqual(schema_errors(js, make_strict=False), [])

    def test_typo_deep_in_the_pod_template(self):
        js = self.jobset()
        c = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        c["volumeMount"] = c.pop("volumeMounts")
        self.assertRejected(js, "'volumeMount' was unexpected")

    def test_wrong_types(self):
        js = self.jobset()
        job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
        job["backoffLimit"] = "0"
        self.assertRejected(js, "'0' is not of type 'integer'")
        js = self.jobset()
        c = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
        env_of(c)["MASTER_PORT"]["value"] = 29500  # env values are strings: quote them
        self.assertRejected(js, "29500 is not of type 'string'")

    def test_bad_enum(self):
        js = self.jobset()
        js["spec"]["failurePolicy"]["restartStrategy"] = "Recreat"
        self.assertRejected(js, "'Recreat' is not one of")
        js = self.jobset()
        js["spec"]["failurePolicy"]["rules"][0]["action"] = "FailJob"  # a Job action, not JobSet's
        self.assertRejected(js, "'FailJob' is not one of")

    def test_missing_required(self):
        js = self.jobset()
        del js["spec"]["replicatedJobs"][0]["name"]
        self.assertRejected(js, "'name' is a required property")

    def test_wrong_kind_for_the_schema(self):
        js = self.jobset()
        js["apiVersion"] = "jobset.x-k8s.io/v1alpha1"
        with self.assertRaises(KeyError):
            schema_errors(js)

    def test_typo_in_pytorchjob_and_configmap(self):
        pj = self.pytorchjob()
        pj["spec"]["runPolicy"]["backofLimit"] = pj["spec"]["runPolicy"].pop("backoffLimit")
        self.assertRejected(pj, "'backofLimit' was unexpected")
        cm = copy.deepcopy(by_kind(self.pytorch_docs, "ConfigMap"))
        cm["datas"] = cm.pop("data")
        self.assertRejected(cm, "'datas' was unexpected")

    def test_semantics_the_schema_cannot_see(self):
        js = self.jobset()
        rule = js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][0]
        rule["onExitCodes"]["values"] = [76, 75]
        rule["action"] = "Failjob"
        self.assertEqual(schema_errors(js), [])  # the CRD has no enum or order here
        problems = k8s_semantic_problems(js)
        self.assertTrue(any("unknown action" in p for p in problems), problems)
        self.assertTrue(any("sorted" in p for p in problems), problems)
        pj = self.pytorchjob()
        pj["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] = "ExitCodes"
        self.assertEqual(schema_errors(pj), [])
        self.assertTrue(any("ExitCodes" in p for p in k8s_semantic_problems(pj)))


class StepwatchContract(unittest.TestCase):
    """The manifests say what docs/run.md's exit codes and docs/kubernetes.md's mapping say."""

    @classmethod
    def setUpClass(cls):
        cls.docs = {name: load_docs(path) for name, path in MANIFESTS.items()}
        cls.specs = {name: tomllib.loads(spec_toml(docs)) for name, docs in cls.docs.items()}

    def requeue_code(self, name):
        return self.specs[name]["kubernetes"]["requeue_exit_code"]

    def test_the_spec_hands_restarts_to_kubernetes(self):
        for name, spec in self.specs.items():
            with self.subTest(manifest=name):
                self.assertEqual(spec["runbook"]["resume_owner"], "kubernetes")
                self.assertNotIn("resume_command", spec["runbook"])  # one owner of restarts
                code = self.requeue_code(name)
                self.assertTrue(128 <= code <= 255, code)  # PyTorchJob retries only these
                self.assertNotIn(code, STOP_CODES)
                self.assertTrue(any(p.get("kind", "webhook") == "webhook"
                                    for p in spec["runbook"].get("pager", [])))

    def test_jobset_stops_on_75_76_and_restarts_on_the_requeue_code(self):
        js = by_kind(self.docs["jobset.yaml"], "JobSet")
        code = self.requeue_code("jobset.yaml")
        fp = js["spec"]["failurePolicy"]
        self.assertGreater(fp.get("maxRestarts", 0), 0)
        rules = fp["rules"]
        # The first rule matching reason PodFailurePolicy must fail the JobSet.
        first = next(r for r in rules if not r.get("onJobFailureReasons")
                     or "PodFailurePolicy" in r["onJobFailureReasons"])
        self.assertEqual(first["action"], "FailJobSet")
        # No rule catches BackoffLimitExceeded (the requeue code's path): default RestartJobSet.
        for r in rules:
            reasons = r.get("onJobFailureReasons") or ["BackoffLimitExceeded"]
            if "BackoffLimitExceeded" in reasons:
                self.assertIn(r["action"], ("RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"))
        for job in jobset_job_specs(js):
            self.assertEqual(job["backoffLimit"], 0)
            pod = job["template"]["spec"]
            self.assertEqual(pod["restartPolicy"], "Never")
            trainer = pod["containers"][0]["name"]
            fail = [r for r in job["podFailurePolicy"]["rules"] if r["action"] == "FailJob"]
            self.assertEqual(len(fail), 1)
            self.assertEqual(fail[0]["onExitCodes"],
                             {"containerName": trainer, "operator": "In", "values": list(STOP_CODES)})
            # The requeue code must reach the JobSet as an ordinary failure.
            for r in job["podFailurePolicy"]["rules"]:
                self.assertNotIn(code, (r.get("onExitCodes") or {}).get("values", []), r)
            ignore = [r for r in job["podFailurePolicy"]["rules"] if r["action"] == "Ignore"]
            self.assertEqual([c["type"] for r in ignore for c in r.get("onPodConditions", [])],
                             ["DisruptionTarget"])

    def test_pytorchjob_exit_code_policy_matches(self):
        pj = by_kind(self.docs["pytorchjob.yaml"], "PyTorchJob")
        code = self.requeue_code("pytorchjob.yaml")
        self.assertIn("backoffLimit", pj["spec"]["runPolicy"])
        retryable = lambda c: c >= 128  # training-operator v1.9.4 IsRetryableExitCode
        self.assertTrue(retryable(code))
        self.assertFalse(any(retryable(c) for c in STOP_CODES))
        replicas = pj["spec"]["pytorchReplicaSpecs"]
        self.assertEqual(sum(rs.get("replicas", 1) for rs in replicas.values()), 2)  # 2 nodes
        for rtype, rs in replicas.items():
            with self.subTest(replica=rtype):
                self.assertEqual(rs["restartPolicy"], "ExitCode")
                names = [c["name"] for c in rs["template"]["spec"]["containers"]]
                self.assertIn("pytorch", names)  # the only container whose exit code counts

    def containers(self, name):
        doc = next(d for d in self.docs[name] if d["kind"] != "ConfigMap")
        pods = ([j["template"] for j in jobset_job_specs(doc)] if doc["kind"] == "JobSet"
                else pytorch_pod_templates(doc))
        for pod in pods:
            yield pod["spec"], pod["spec"]["containers"][0]

    def test_the_container_runs_stepwatch_with_the_configmap_spec(self):
        for name in MANIFESTS:
            cm = by_kind(self.docs[name], "ConfigMap")
            for pod, c in self.containers(name):
                with self.subTest(manifest=name):
                    cmd = c["command"]
                    self.assertEqual(cmd[:4], ["stepwatch", "run", "--spec", SPEC_PATH])
                    self.assertEqual(cmd[cmd.index("--") + 1], "torchrun")
                    state = cmd[cmd.index("--state-dir") + 1]
                    volumes = {v["name"]: v for v in pod["volumes"]}
                    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
                    spec_vol = volumes[mounts[os.path.dirname(SPEC_PATH)]["name"]]
                    self.assertEqual(spec_vol["configMap"]["name"], cm["metadata"]["name"])
                    # The state survives the pod: a volume claim, one directory per pod or rank.
                    self.assertIn("persistentVolumeClaim", volumes[mounts[state]["name"]])
                    self.assertIn("subPathExpr", mounts[state])
                    # The beacons live in shared memory: /dev/shm an in-memory emptyDir.
                    self.assertEqual(env_of(c)["STEPWATCH_DIR"]["value"], BEACON_DIR)
                    shm = volumes[mounts["/dev/shm"]["name"]]
                    self.assertEqual(shm["emptyDir"]["medium"], "Memory")
                    # Kubernetes' own SIGTERM must leave stepwatch its preempt_grace.
                    grace = duration_s(self.specs[name]["runbook"]["preempt_grace"])
                    self.assertGreater(pod["terminationGracePeriodSeconds"], grace)
                    self.assertIn("STEPWATCH_JOB", env_of(c))

    def test_jobset_incarnation_through_the_downward_api(self):
        for _, c in self.containers("jobset.yaml"):
            env = env_of(c)
            self.assertEqual(env["STEPWATCH_INCARNATION"]["valueFrom"]["fieldRef"]["fieldPath"],
                             f"metadata.labels['{RESTART_ATTEMPT_LABEL}']")
            self.assertEqual(env["STEPWATCH_JOB"]["valueFrom"]["fieldRef"]["fieldPath"],
                             f"metadata.labels['{JOBSET_NAME_LABEL}']")

    def test_pytorchjob_has_no_restart_counter_to_give(self):
        # Nothing in a PyTorchJob pod counts restarts; a made-up STEPWATCH_INCARNATION (a
        # constant) would pin every incarnation to one number.
        for _, c in self.containers("pytorchjob.yaml"):
            self.assertNotIn("STEPWATCH_INCARNATION", env_of(c))

    def test_check_spec_accepts_the_embedded_spec(self):
        binary = os.environ.get("STEPWATCH_BIN")
        if not binary or not os.access(binary, os.X_OK):
            self.skipTest("STEPWATCH_BIN is not set to the stepwatch binary")
        for name, docs in self.docs.items():
            with self.subTest(manifest=name), tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "job.toml")
                with open(path, "w") as f:
                    f.write(spec_toml(docs))
                r = subprocess.run([binary, "check-spec", path], capture_output=True, text=True,
                                   timeout=30)
                out = r.stdout + r.stderr
                self.assertEqual(r.returncode, 0, out)
                self.assertNotIn("warning:", out)


class MultiNodeJobSet(unittest.TestCase):
    """jobset-multinode.yaml: every pod's `stepwatch run --coord` exits with what the job's
    leader wrote, and the JobSet turns it into one restart of the whole set, or a stop."""

    @classmethod
    def setUpClass(cls):
        cls.docs = load_docs(MULTINODE)
        cls.cm = by_kind(cls.docs, "ConfigMap")
        cls.js = by_kind(cls.docs, "JobSet")
        cls.job = cls.js["metadata"]["name"]
        cls.spec = tomllib.loads(cls.cm["data"][f"{cls.job}.toml"])
        cls.agent = tomllib.loads(cls.cm["data"]["agent.toml"])
        (cls.job_spec,) = jobset_job_specs(cls.js)
        cls.pod = cls.job_spec["template"]["spec"]

    def test_every_document_validates(self):
        self.assertEqual(sorted(d["kind"] for d in self.docs), ["ConfigMap", "JobSet"])
        for doc in self.docs:
            with self.subTest(kind=doc["kind"]):
                self.assertEqual(schema_errors(doc), [])
                self.assertEqual(k8s_semantic_problems(doc), [])
        hint = comment_block(MULTINODE, "affinity")
        doc = copy.deepcopy(self.js)
        jobset_job_specs(doc)[0]["template"]["spec"].update(hint)
        self.assertEqual(schema_errors(doc), [])

    def test_the_exit_statuses_restart_the_whole_set_once_or_stop_it(self):
        code = self.spec["kubernetes"]["requeue_exit_code"]
        self.assertEqual(self.spec["runbook"]["resume_owner"], "kubernetes")
        self.assertTrue(128 <= code <= 255 and code not in STOP_CODES, code)
        fp = self.js["spec"]["failurePolicy"]
        self.assertEqual(fp["restartStrategy"], "BlockingRecreate")  # every old pod gone first
        self.assertEqual([(r["action"], r["onJobFailureReasons"]) for r in fp["rules"]],
                         [("FailJobSet", ["PodFailurePolicy"])])
        self.assertEqual(self.job_spec["backoffLimit"], 0)  # the first pod's exit fails the Job
        rules = self.job_spec["podFailurePolicy"]["rules"]
        fail = [r for r in rules if r["action"] == "FailJob"]
        self.assertEqual([r["onExitCodes"] for r in fail],
                         [{"containerName": "trainer", "operator": "In", "values": list(STOP_CODES)}])
        for r in rules:
            self.assertNotIn(code, (r.get("onExitCodes") or {}).get("values", []), r)

    def test_the_trainer_runs_under_the_launcher_and_the_agent_beside_it(self):
        (trainer,) = self.pod["containers"]
        (agent,) = self.pod["initContainers"]
        cmd = trainer["command"]
        self.assertEqual(cmd[:3], ["stepwatch", "run", "--coord"])
        self.assertEqual(cmd[3:4], self.agent["coord"]["endpoints"])  # the same etcd
        self.assertEqual(cmd[cmd.index("--") + 1], "torchrun")
        self.assertEqual(cmd[cmd.index("--dir") + 1], BEACON_DIR)
        self.assertEqual(cmd[cmd.index("--master-port") + 1], env_of(trainer)["MASTER_PORT"]["value"])
        env = env_of(trainer)
        self.assertEqual(env["STEPWATCH_DIR"]["value"], BEACON_DIR)
        self.assertEqual(env["STEPWATCH_INCARNATION"]["valueFrom"]["fieldRef"]["fieldPath"],
                         f"metadata.labels['{RESTART_ATTEMPT_LABEL}']")
        self.assertEqual(env["STEPWATCH_JOB"]["valueFrom"]["fieldRef"]["fieldPath"],
                         f"metadata.labels['{JOBSET_NAME_LABEL}']")
        # The agent: a native sidecar (ends with the pod: the pod's exit is the trainer's) that
        # sees the trainer's processes and reads its beacons.
        self.assertEqual(agent["restartPolicy"], "Always")
        self.assertTrue(self.pod["shareProcessNamespace"])
        self.assertEqual(agent["command"][:2], ["stepwatch", "agent"])
        config = agent["command"][agent["command"].index("--config") + 1]
        mounts = {m["mountPath"]: m["name"] for m in agent["volumeMounts"]}
        self.assertEqual(mounts["/dev/shm"], {m["mountPath"]: m["name"] for m in trainer["volumeMounts"]}["/dev/shm"])
        self.assertIn(BEACON_DIR, self.agent["beacon_roots"])
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        items = {i["key"]: i["path"] for i in volumes[mounts[os.path.dirname(config)]]["configMap"]["items"]}
        self.assertEqual(os.path.join(os.path.dirname(config), items["agent.toml"]), config)
        self.assertEqual(os.path.join(os.path.dirname(config), items[f"{self.job}.toml"]),
                         os.path.join(self.agent["specs_dir"], f"{self.job}.toml"))
        self.assertEqual(self.spec["job"], self.job)  # the JobSet's name is STEPWATCH_JOB
        self.assertIn(self.job, self.agent["preempt_jobs"])
        self.assertIn("persistentVolumeClaim", volumes[mounts[self.agent["state_dir"]]])
        self.assertGreater(self.pod["terminationGracePeriodSeconds"],
                           duration_s(self.spec["runbook"]["preempt_grace"]))

    def test_stepwatch_accepts_the_spec_and_the_agent_configuration(self):
        binary = os.environ.get("STEPWATCH_BIN")
        if not binary or not os.access(binary, os.X_OK):
            self.skipTest("STEPWATCH_BIN is not set to the stepwatch binary")
        with tempfile.TemporaryDirectory() as tmp:
            spec = os.path.join(tmp, f"{self.job}.toml")
            config = os.path.join(tmp, "agent.toml")
            with open(spec, "w") as f:
                f.write(self.cm["data"][f"{self.job}.toml"])
            with open(config, "w") as f:
                f.write(self.cm["data"]["agent.toml"])
            r = subprocess.run([binary, "check-spec", spec], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertNotIn("warning:", r.stdout + r.stderr)
            r = subprocess.run([binary, "agent", "--config", config, "--check-config"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("multi-node: etcd http://stepwatch-etcd", r.stdout)
            self.assertIn(f"preempts: {self.job}", r.stdout)
            # And the check bites: a key the agent does not know.
            with open(config, "a") as f:
                f.write('restart_wiat = "1m"\n')
            r = subprocess.run([binary, "agent", "--config", config, "--check-config"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("coord.restart_wiat", r.stderr)
            self.assertIn("restart_wait", r.stderr)  # did you mean


if __name__ == "__main__":
    unittest.main()
