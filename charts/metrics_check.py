#!/usr/bin/env python3
"""Checks that the chart's alerts and dashboard use only metrics dcs exports, for charts/test.sh
and e2e/.

    python3 charts/metrics_check.py RENDERED.yaml --source operator/src/metrics.rs runner/src/metrics.rs \
        [--values crds/src/conditions.rs operator/src/probe.rs]
    python3 charts/metrics_check.py RENDERED.yaml --scrape operator.txt runner.txt

RENDERED.yaml is `helm template` output with the PrometheusRule and the dashboard ConfigMap (or
`kubectl get -o yaml` of them: a List). Every
PromQL expression in them (alert rules, dashboard targets, template variable queries) is taken
apart into its selectors (`metric{label="..."}`); each metric must be one the code exports:

- --source: a name in a string literal of those Rust files, outside their `#[cfg(test)]` module
  (where both crates render their exposition text);
- --scrape: a name in a `# TYPE` line of those /metrics answers, and then, when the answers hold
  samples of it, every label a selector matches on must be one those samples carry, or one
  Prometheus adds to a scraped target (namespace, pod, ...);
- --values: every value a selector matches exactly (`=`, `!=`) on the condition labels `type`,
  `reason` and `status` must be a string literal of those Rust files (where the condition types
  and reasons are defined), so an alert cannot wait for a reason the operator never writes.

Prints one line per expression that fails and exits 1 when there is one; 0 otherwise.
"""

from __future__ import annotations

import json
import re
import sys

import yaml

# Labels the Prometheus Operator puts on every series of a scraped pod or service.
TARGET_LABELS = {"namespace", "pod", "container", "endpoint", "service", "job", "instance"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "Inf", "NaN", "inf", "nan"}
STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
RANGE = re.compile(r"\[[^\]]*\]")
SELECTOR = re.compile(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?(\s*\()?")
MATCHER = re.compile(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)")
EXACT_MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*!?=\s*"((?:[^"\\]|\\.)*)"')
# The labels of dcs_sync_condition whose values are names defined in the code.
CONDITION_LABELS = {"type", "reason", "status"}
RUST_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def exact_matches(expr: str) -> list[tuple[str, str, str]]:
    """(metric, label, value) of every `label="value"` or `label!="value"` matcher in a selector."""
    out = []
    for m in re.finditer(r"(?<![\w:.$])([a-zA-Z_:][\w:]*)\s*\{([^}]*)\}", expr):
        out.extend((m.group(1), label, value) for label, value in EXACT_MATCHER.findall(m.group(2)))
    return out


def selectors(expr: str) -> list[tuple[str, list[str]]]:
    """The (metric, matched labels) of every vector selector in a PromQL expression."""
    # Grafana's label_values(selector, label): the last argument is a label, not a metric.
    expr = re.sub(r"label_values\((.*),\s*\w+\s*\)\s*$", r"label_values(\1)", expr.strip())
    text = GROUPING.sub(" ", RANGE.sub(" ", STRING.sub('""', expr)))
    found = []
    for m in SELECTOR.finditer(text):
        name, matchers, call = m.groups()
        if call or name in KEYWORDS:
            continue
        found.append((name, MATCHER.findall(matchers or "")))
    return found


def expressions(path: str) -> list[tuple[str, str]]:
    """(where, expression) of every alert rule and dashboard query in the rendered chart."""
    out = []
    with open(path, encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    docs = [item for d in docs for item in ((d.get("items") or []) if d["kind"] == "List" else [d])]
    for doc in docs:
        if doc["kind"] == "PrometheusRule":
            for group in doc["spec"]["groups"]:
                for rule in group["rules"]:
                    out.append((f"alert {rule.get('alert') or rule.get('record')}", str(rule["expr"])))
        if doc["kind"] == "ConfigMap":
            for key, text in (doc.get("data") or {}).items():
                if not key.endswith(".json"):
                    continue
                dash = json.loads(text)
                for panel in walk_panels(dash.get("panels", [])):
                    for t in panel.get("targets", []):
                        out.append((f"panel {panel['title']!r}", t["expr"]))
                for var in dash.get("templating", {}).get("list", []):
                    if var.get("type") == "query":
                        q = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
                        out.append((f"variable {var['name']}", q))
    return out


def walk_panels(panels: list[dict]):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def rust_literals(paths: list[str]) -> list[str]:
    """The string literals of Rust files, outside comments and their `#[cfg(test)]` module."""
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            code = fh.read().split("#[cfg(test)]")[0]
        code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("//"))
        out.extend(literal[1:-1] for literal in RUST_STRING.findall(code))
    return out


def exported_from_source(paths: list[str]) -> dict[str, set[str] | None]:
    names: dict[str, set[str] | None] = {}
    for literal in rust_literals(paths):
        for name in re.findall(r"\bdcs_[a-z0-9_]+\b", literal):
            names[name] = None  # labels unknown from the source
    return names


def exported_from_scrapes(paths: list[str]) -> dict[str, set[str] | None]:
    names: dict[str, set[str] | None] = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.rstrip("\n")
                if line.startswith("# TYPE "):
                    names.setdefault(line.split()[2], None)
                elif line and not line.startswith("#"):
                    m = re.match(r"([a-zA-Z_:][\w:]*)(\{(.*)\})?\s", line)
                    if m:
                        labels = set(re.findall(r'([a-zA-Z_]\w*)="', m.group(3) or ""))
                        names[m.group(1)] = (names.get(m.group(1)) or set()) | labels
    return names


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 3 or args[1] not in ("--source", "--scrape"):
        print(__doc__)
        return 2
    rendered, mode, inputs = args[0], args[1], args[2:]
    values: set[str] | None = None
    if "--values" in inputs:
        at = inputs.index("--values")
        inputs, value_files = inputs[:at], inputs[at + 1 :]
        if mode != "--source" or not inputs or not value_files:
            print(__doc__)
            return 2
        values = set(rust_literals(value_files))
    exported = exported_from_source(inputs) if mode == "--source" else exported_from_scrapes(inputs)
    exprs = expressions(rendered)
    if not exprs:
        print(f"no alert rule or dashboard query in {rendered}")
        return 1
    bad = 0
    for where, expr in exprs:
        sels = selectors(expr)
        problems = []
        if not sels:
            problems.append("selects no metric")
        for name, labels in sels:
            if name not in exported:
                problems.append(f"{name} is not exported")
            elif exported[name] is not None:
                unknown = [l for l in labels if l not in exported[name] | TARGET_LABELS]
                if unknown:
                    problems.append(f"{name} has no label {', '.join(unknown)}")
        if values is not None:
            for name, label, value in exact_matches(expr):
                if label in CONDITION_LABELS and value not in values:
                    problems.append(f"{name}: no {label} {value!r} is defined in the code")
        if problems:
            bad += 1
            print(f"{where}: {'; '.join(problems)}: {expr}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
