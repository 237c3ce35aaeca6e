#!/usr/bin/env python3
"""Assertions over rendered manifests, for charts/test.sh.

    python3 charts/chart_assert.py FILE EXPR

FILE holds `helm template` output. Every document must parse as YAML and be an object with
apiVersion, kind and metadata.name (this is checked before EXPR). EXPR is a Python expression
evaluated with:

    objs                  every object, in order
    find(kind, name=None, namespace=None)   the objects of that kind (and name/namespace)
    one(kind, name=None, namespace=None)    exactly one such object (fails otherwise)
    kinds()               the sorted list of kinds
    container(kind="Deployment")            the first container of the (only) workload
    args()                that container's args
    env(name)             that container's env entry named `name` (or None)
    rules(kind, ns=None)  the rules of the only ClusterRole/Role (in namespace ns)
    verbs(rules, resource, group="")        the verbs granted on resource in group
    crd_file              the chart's crds/dorischangelogsyncs.yaml, parsed
    crd_text              its text
    runner_labels         the labels operator/src/reconcile/build.rs puts on runner pods
    runner_port_name      the name of the runner container's metrics port there
    selects(selector, labels)  whether a matchLabels selector selects pods with those labels
    json, re              the modules

EXPR must be truthy; on failure the script prints what it saw and exits 1.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CRD_PATH = os.path.join(HERE, "dcs-operator", "crds", "dorischangelogsyncs.yaml")
BUILD_RS = os.path.join(HERE, "..", "operator", "src", "reconcile", "build.rs")


def from_build_rs() -> tuple[dict[str, str], str]:
    """The runner pods' labels (the constant ones of `labels()`) and metrics port name."""
    with open(BUILD_RS, encoding="utf-8") as fh:
        code = fh.read()
    body = re.search(r"pub fn labels\(sync: &str\)[^{]*\{(.*?)\n\}", code, re.S)
    if not body:
        raise Failure("no labels() in build.rs")
    labels = dict(re.findall(r'\(\s*"([^"]+)"\.to_owned\(\),\s*"([^"]+)"\.to_owned\(\),?\s*\)', body.group(1)))
    port = re.search(r'pub const RUNNER_METRICS_PORT_NAME: &str = "([^"]+)";', code)
    if not labels or not port:
        raise Failure("runner labels or RUNNER_METRICS_PORT_NAME not found in build.rs")
    return labels, port.group(1)


class Failure(Exception):
    pass


def load(path: str) -> tuple[list[dict[str, Any]], str]:
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    objs = []
    for i, doc in enumerate(yaml.safe_load_all(text)):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise Failure(f"document {i} is not an object: {doc!r}")
        for key in ("apiVersion", "kind"):
            if not isinstance(doc.get(key), str) or not doc[key]:
                raise Failure(f"document {i} has no {key}: {doc!r}")
        name = (doc.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise Failure(f"document {i} ({doc['kind']}) has no metadata.name")
        objs.append(doc)
    seen = set()
    for o in objs:
        key = (o["apiVersion"], o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        if key in seen:
            raise Failure(f"duplicate object {key}")
        seen.add(key)
    return objs, text


def main() -> int:
    path, expr = sys.argv[1], sys.argv[2]
    try:
        objs, _text = load(path)
    except (Failure, yaml.YAMLError) as e:
        print(f"    does not parse: {e}")
        return 1

    def find(kind: str, name: str | None = None, namespace: str | None = None) -> list[dict]:
        return [
            o
            for o in objs
            if o["kind"] == kind
            and (name is None or o["metadata"]["name"] == name)
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]

    def one(kind: str, name: str | None = None, namespace: str | None = None) -> dict:
        found = find(kind, name, namespace)
        if len(found) != 1:
            raise Failure(f"expected one {kind} {name or ''} {namespace or ''}, found {len(found)}")
        return found[0]

    def kinds() -> list[str]:
        return sorted(o["kind"] for o in objs)

    def container(kind: str = "Deployment") -> dict:
        return one(kind)["spec"]["template"]["spec"]["containers"][0]

    def args() -> list[str]:
        return container().get("args", [])

    def env(name: str) -> dict | None:
        return next((e for e in container().get("env", []) if e["name"] == name), None)

    def rules(kind: str, ns: str | None = None) -> list[dict]:
        if kind == "Role":
            found = [o for o in find("Role", namespace=ns) if "leader" not in o["metadata"]["name"]]
            if len(found) != 1:
                raise Failure(f"expected one Role in {ns}, found {len(found)}")
            return found[0]["rules"]
        return one(kind)["rules"]

    def verbs(rule_list: list[dict], resource: str, group: str = "") -> list[str]:
        out: list[str] = []
        for r in rule_list:
            if resource in r.get("resources", []) and group in r.get("apiGroups", []):
                out.extend(r["verbs"])
        return out

    def selects(selector: dict, labels: dict) -> bool:
        match = selector.get("matchLabels") or {}
        if selector.get("matchExpressions"):
            raise Failure("matchExpressions are not checked here")
        return bool(match) and all(labels.get(k) == v for k, v in match.items())

    with open(CRD_PATH, encoding="utf-8") as fh:
        crd_text = fh.read()
    crd_file = yaml.safe_load(crd_text)
    scope = {
        "objs": objs,
        "find": find,
        "one": one,
        "kinds": kinds,
        "container": container,
        "args": args,
        "env": env,
        "rules": rules,
        "verbs": verbs,
        "crd_file": crd_file,
        "crd_text": crd_text,
        "selects": selects,
        "re": re,
        "json": json,
        "path": path,
    }
    try:
        scope["runner_labels"], scope["runner_port_name"] = from_build_rs()
        ok = eval(expr, scope)  # noqa: S307 - test expressions written in charts/test.sh
    except Failure as e:
        print(f"    {e}")
        return 1
    except Exception as e:  # noqa: BLE001 - report any error of the expression
        print(f"    {type(e).__name__}: {e}")
        return 1
    if not ok:
        print(f"    false: {expr}")
        print(f"    kinds: {kinds()}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
