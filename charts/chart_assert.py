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

EXPR must be truthy; on failure the script prints what it saw and exits 1.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CRD_PATH = os.path.join(HERE, "dcs-operator", "crds", "dorischangelogsyncs.yaml")


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
        "re": re,
        "path": path,
    }
    try:
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
