#!/usr/bin/python3
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Turns one version of an upstream CustomResourceDefinition into the trimmed JSON Schema kept
here: spec.versions[NAME].schema.openAPIV3Schema with every `description` removed and the
top-level `status` dropped (a manifest never sets it). Nothing else is changed: x-kubernetes-*
extensions stay (jsonschema ignores them; the test reads x-kubernetes-int-or-string), and the
strictness the test adds (unknown fields are errors) is applied when the test loads the file,
so what is stored here stays the published schema. See README.md.

    convert_crd.py CRD.yaml VERSION OUT.json
"""
import json
import sys

import yaml


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(crd_path, version, out_path):
    with open(crd_path) as f:
        crd = yaml.safe_load(f)
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    schema = strip(versions[version]["schema"]["openAPIV3Schema"])
    schema["properties"].pop("status", None)
    with open(out_path, "w") as f:
        json.dump(schema, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
