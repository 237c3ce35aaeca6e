#!/usr/bin/env python3
"""A small `helm template` / `helm lint` over the PyPI package helm-python-sdk.

helm-python-sdk embeds Helm 4's Go SDK as a shared library (ctypes, no helm binary, no
network), so the chart can be rendered and linted on machines that have no helm.

    python3 charts/helm.py render CHART_DIR [--release NAME] [--namespace NS]
                                  [-f values.yaml ...] [--set k=v ...] [--set-string k=v ...]
                                  [--set-json k=JSON ...] [--include-crds] [--show-only PATH ...]
                                  [--notes] [--kube-version v1.30.0]
    python3 charts/helm.py lint CHART_DIR [--strict] [--namespace NS] [-f ...] [--set ...]

render prints the manifests like `helm template`: one `---` document per object, headed by
`# Source: <chart>/<path>`, in Helm's install order (CRDs first with --include-crds); NOTES.txt
only with --notes (then nothing else). Values are composed as Helm's CLI does: chart defaults,
then each -f file in order (maps merged, everything else replaced), then --set-json, --set,
--set-string in that order. A `null` value removes a default key. Values are checked against
values.schema.json; a schema or template error exits 1 with Helm's message on stderr.

lint prints every finding (`[INFO]`, `[WARNING]`, `[ERROR]` path: message) and exits 1 when
there is an error, or with --strict any warning too (Helm's --strict also renders templates
with missingkey=error). Informational findings never fail.

The default release name is `dcs-operator` and the default namespace `default`.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

try:
    import helm_python as helm
except ImportError:  # pragma: no cover - depends on the machine
    sys.stderr.write(
        "helm.py: the Python package helm-python-sdk is missing: "
        "pip install -r .ci/requirements.txt\n"
    )
    sys.exit(3)

# Helm's InstallOrder (pkg/release/v1/util/kind_sorter.go); unknown kinds go last, by kind name.
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]
_RANK = {k: i for i, k in enumerate(INSTALL_ORDER)}
_DOC_SPLIT = re.compile(r"(?m)^---[ \t]*(?:#.*)?$")
_KIND = re.compile(r"(?m)^kind:[ \t]*['\"]?([A-Za-z0-9]+)")


class UsageError(Exception):
    pass


def merge_maps(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's mergeMaps: nested maps merge, anything else in override replaces."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_maps(out[key], value)
        else:
            out[key] = value
    return out


def user_values(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in args.values or []:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as e:
            raise UsageError(f"cannot read values file {path}: {e}") from e
        parsed = helm.values_from_yaml(text) if text.strip() else {}
        values = merge_maps(values, parsed or {})
    for expr in args.set_json or []:
        values = merge_maps(values, helm.parse_set_json(expr))
    for expr in args.set or []:
        values = merge_maps(values, helm.parse_set_string(expr))
    for expr in args.set_string or []:
        values = merge_maps(values, helm.parse_set_string_values(expr))
    return values


def split_documents(text: str) -> list[str]:
    docs = []
    for doc in _DOC_SPLIT.split(text):
        # A document made only of comments and blank lines is dropped, as Helm does.
        meaningful = [
            ln for ln in doc.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
        ]
        if meaningful:
            docs.append(doc.strip("\n") + "\n")
    return docs


def sort_key(item: tuple[int, str, str]) -> tuple[int, str, int]:
    index, _source, doc = item
    m = _KIND.search(doc)
    kind = m.group(1) if m else ""
    return (_RANK.get(kind, len(INSTALL_ORDER)), "" if kind in _RANK else kind, index)


def render(args: argparse.Namespace) -> int:
    values = user_values(args)
    helm.validate_release_name(args.release)
    with helm.Chart.load(args.chart) as chart:
        rendered = chart.render(
            values,
            name=args.release,
            namespace=args.namespace,
            revision=1,
            is_install=True,
        )
        crds = chart.crds if args.include_crds and not args.notes else []
    out = sys.stdout
    if args.notes:
        for path, text in sorted(rendered.items()):
            if path.endswith("/NOTES.txt") and path.count("/templates/") == 1:
                out.write(text)
        return 0
    show_only = [p.rstrip("/") for p in args.show_only or []]
    docs: list[tuple[int, str, str]] = []
    for path in sorted(rendered):
        if path.endswith("NOTES.txt") or os.path.basename(path).startswith("_"):
            continue
        if show_only and not any(path == p or path.endswith("/" + p) for p in show_only):
            continue
        for doc in split_documents(rendered[path]):
            docs.append((len(docs), path, doc))
    if show_only and not docs:
        raise UsageError(f"could not find template(s) {', '.join(show_only)} in chart")
    for crd in crds:
        # crds/ is not templated: printed as is, first, as `helm template --include-crds` does.
        source = f"{chart_name(args.chart)}/{crd['name']}"
        for doc in split_documents(crd["data"]):
            out.write(f"---\n# Source: {source}\n{doc}")
    for _i, path, doc in sorted(docs, key=sort_key):
        out.write(f"---\n# Source: {path}\n{doc}")
    return 0


def chart_name(path: str) -> str:
    with helm.Chart.load(path) as chart:
        return chart.name


SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def lint(args: argparse.Namespace) -> int:
    values = user_values(args)
    report = helm.lint(
        args.chart,
        values,
        strict=args.strict,
        namespace=args.namespace,
        kube_version=args.kube_version,
    )
    failing = 0
    for msg in report.get("messages", []):
        severity = int(msg.get("severity", 0))
        label = SEVERITY.get(severity, str(severity))
        print(f"[{label}] {msg.get('path', '')}: {str(msg.get('error', '')).strip()}")
        if severity >= 3 or (args.strict and severity == 2) or severity == 0:
            failing += 1
    # Errors that are not attached to a message (should not happen, but never drop one).
    listed = {str(m.get("error", "")) for m in report.get("messages", [])}
    for err in report.get("errors", []) or []:
        if str(err) not in listed:
            print(f"[ERROR] {err.strip()}")
            failing += 1
    linted = report.get("total_charts_linted", 0)
    if linted < 1:
        print(f"[ERROR] no chart was linted at {args.chart}")
        failing += 1
    verdict = "failed" if failing else "passed"
    print(f"lint {verdict}: {linted} chart(s) linted, {failing} failing finding(s)")
    return 1 if failing else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="helm.py", description="helm template/lint over helm-python-sdk (Helm 4, no binary)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("chart", help="chart directory (or .tgz)")
        sp.add_argument("--namespace", "-n", default="default")
        sp.add_argument("-f", "--values", action="append", metavar="FILE")
        sp.add_argument("--set", action="append", metavar="K=V")
        sp.add_argument("--set-string", action="append", metavar="K=V")
        sp.add_argument("--set-json", action="append", metavar="K=JSON")
        sp.add_argument("--kube-version", default=None, help="e.g. v1.30.0 (lint only)")

    r = sub.add_parser("render", help="print the rendered manifests (helm template)")
    common(r)
    r.add_argument("--release", "--name", default="dcs-operator")
    r.add_argument("--include-crds", action="store_true")
    r.add_argument("--show-only", "-s", action="append", metavar="TEMPLATE")
    r.add_argument("--notes", action="store_true", help="print the rendered NOTES.txt only")

    lnt = sub.add_parser("lint", help="lint the chart; non-zero exit on a problem")
    common(lnt)
    lnt.add_argument("--strict", action="store_true", help="warnings fail too")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command == "render":
            return render(args)
        return lint(args)
    except UsageError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 1
    except helm.HelmError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
