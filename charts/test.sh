#!/usr/bin/env bash
# The chart's tests: strict lint, renders of several value combinations checked object by object,
# schema rejections, and the CRD shipped as crdgen wrote it. Lints and renders with the helm CLI
# built from helm.sh/helm/v4 (tests/helm, tests/go-tools/build.sh helm; $HELM overrides it);
# asserts on the rendered YAML with PyYAML (chart_assert.py). No cluster, no network once built.
#
#   charts/test.sh            # prints one line per check, then `N passed, N failed`
#
# Exits non-zero when a check fails.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
CHART=dcs-operator
APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$CHART/Chart.yaml")

if ! "$PY" -c 'import yaml' >/dev/null 2>&1; then
    echo "test.sh: installing the Python packages of .ci/requirements.txt (PyYAML)"
    "$PY" -m pip install --quiet --disable-pip-version-check -r ../.ci/requirements.txt
fi
if [ -z "${HELM:-}" ]; then
    ../tests/go-tools/build.sh helm
    HELM=$(cd .. && pwd)/target/helm/bin/helm
fi
"$HELM" version --short

# render_chart [--release NAME] [helm template options...]: `helm template` of the chart, release
# dcs-operator in namespace default unless given.
render_chart() {
    local release=dcs-operator args=()
    while (($#)); do
        case $1 in
        --release) release=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
        esac
    done
    "$HELM" template "$release" "$CHART" --namespace default "${args[@]}"
}

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
ko() {
    failed=$((failed + 1))
    echo "FAIL $1"
    [ -n "${2:-}" ] && sed 's/^/    /' <<<"$2" | head -40
    return 0
}

# lint NAME [helm lint options...]: strict lint must pass.
lint() {
    local name=$1 out
    shift
    if out=$("$HELM" lint "$CHART" --strict "$@" 2>&1); then ok "$name"; else ko "$name" "$out"; fi
}

# render ID [render_chart options...]: renders into $T/ID.yaml; a failed render is a failure.
render() {
    local id=$1 out
    shift
    if out=$(render_chart "$@" 2>&1 >"$T/$id.yaml"); then
        ok "render $id"
    else
        ko "render $id" "$out"
        : >"$T/$id.yaml"
    fi
}

# expect ID DESCRIPTION EXPR: EXPR (see chart_assert.py) holds on render ID.
expect() {
    local id=$1 what=$2 expr=$3 out
    if out=$("$PY" chart_assert.py "$T/$id.yaml" "$expr" 2>&1); then
        ok "$id: $what"
    else
        ko "$id: $what" "$out"
    fi
}

# reject NAME PATTERN [render_chart options...]: the render must fail with PATTERN (ERE) in
# its message.
reject() {
    local name=$1 pattern=$2 out
    shift 2
    if out=$(render_chart "$@" 2>&1); then
        ko "$name" "rendered although it should have been rejected"
    elif grep -Eq -- "$pattern" <<<"$out"; then
        ok "$name"
    else
        ko "$name" "rejected, but the message does not match /$pattern/:
$out"
    fi
}

# --- lint ------------------------------------------------------------------------------------
lint "lint --strict with default values"
lint "lint --strict, namespaced RBAC" --set rbac.namespaced=true --set 'watchNamespaces={a,b}'
lint "lint --strict, everything on" --set rbac.namespaced=true --set 'watchNamespaces={a,b}' \
    --set leaderElection.enabled=true --set replicaCount=2 --set metrics.serviceMonitor.enabled=true \
    --set 'imagePullSecrets[0].name=regcred' --set-json 'extraEnv=[{"name":"RUST_LOG","value":"debug"}]'
lint "lint --strict, observability and network policies on" --set 'watchNamespaces={a,b}' \
    --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set runner.podMonitor.enabled=true \
    --set metrics.serviceMonitor.enabled=true --set networkPolicy.enabled=true \
    --set 'networkPolicy.apiServer.cidrs={10.0.0.1/32}' --set 'networkPolicy.doris.cidrs={10.1.0.0/16}' \
    --set-json 'runner.resources={"requests":{"memory":"256Mi"},"limits":{"memory":"1Gi"}}'
if out=$("$HELM" lint "$CHART" --strict --set bogusKey=1 2>&1); then
    ko "lint fails on a value the schema rejects" "$out"
else
    ok "lint fails on a value the schema rejects"
fi

# --- defaults ---------------------------------------------------------------------------------
render default
expect default "exactly SA, ClusterRole(+Binding), metrics Service, Deployment" \
    'kinds() == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount"]'
expect default "every namespaced object is in the release namespace" \
    'all(o["metadata"].get("namespace") == "default" for o in objs if not o["kind"].startswith("Cluster"))'
expect default "image defaults to appVersion" \
    "container()['image'] == 'dcs-operator:$APP_VERSION' and container()['imagePullPolicy'] == 'IfNotPresent'"
expect default "args: runner image, runner metrics addr, metrics addr, log format, nothing else" \
    "args() == ['--runner-image=dcs-runner:$APP_VERSION', '--runner-metrics-addr=0.0.0.0:9464', '--metrics-addr=0.0.0.0:8080', '--log-format=json']"
expect default "POD_NAME and POD_NAMESPACE from the downward API" \
    'env("POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name" and env("POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"'
expect default "liveness /healthz and readiness /readyz on the metrics port" \
    'container()["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"} and container()["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"} and container()["ports"][0]["containerPort"] == 8080'
expect default "container: non-root, read-only root fs, drop ALL, seccomp RuntimeDefault, no escalation" \
    'container()["securityContext"]["readOnlyRootFilesystem"] is True and container()["securityContext"]["runAsNonRoot"] is True and container()["securityContext"]["capabilities"]["drop"] == ["ALL"] and container()["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault" and container()["securityContext"]["allowPrivilegeEscalation"] is False'
expect default "pod: runAsNonRoot with a non-zero uid, seccomp RuntimeDefault" \
    'one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True and one("Deployment")["spec"]["template"]["spec"]["securityContext"]["runAsUser"] != 0 and one("Deployment")["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"'
expect default "resources have requests and limits" \
    'set(container()["resources"]) == {"requests", "limits"} and "memory" in container()["resources"]["limits"]'
expect default "one replica, Recreate without leader election" \
    'one("Deployment")["spec"]["replicas"] == 1 and one("Deployment")["spec"]["strategy"]["type"] == "Recreate"'
expect default "Service selects the Deployment's pods on the metrics port" \
    'all(one("Deployment")["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in one("Service")["spec"]["selector"].items()) and one("Service")["spec"]["ports"][0]["targetPort"] == "metrics" and one("Service")["spec"]["type"] == "ClusterIP"'
expect default "Deployment selector matches its pod labels" \
    'all(one("Deployment")["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in one("Deployment")["spec"]["selector"]["matchLabels"].items())'
expect default "ClusterRoleBinding binds the ClusterRole to the ServiceAccount" \
    'one("ClusterRoleBinding")["roleRef"]["name"] == one("ClusterRole")["metadata"]["name"] and one("ClusterRoleBinding")["subjects"] == [{"kind": "ServiceAccount", "name": one("ServiceAccount")["metadata"]["name"], "namespace": "default"}] and one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == one("ServiceAccount")["metadata"]["name"]'
expect default "secrets: exactly [get]" 'verbs(rules("ClusterRole"), "secrets") == ["get"]'
expect default "syncs: get/list/watch/patch, status patch, finalizers update" \
    'sorted(verbs(rules("ClusterRole"), "dorischangelogsyncs", "dcs.dev")) == ["get", "list", "patch", "watch"] and verbs(rules("ClusterRole"), "dorischangelogsyncs/status", "dcs.dev") == ["patch"] and verbs(rules("ClusterRole"), "dorischangelogsyncs/finalizers", "dcs.dev") == ["update"]'
expect default "configmaps include get/update/patch (the per-sync runner Role grants them)" \
    '{"get", "update", "patch"} <= set(verbs(rules("ClusterRole"), "configmaps"))'
expect default "deployments, jobs, serviceaccounts, roles, rolebindings, pods, events covered" \
    'verbs(rules("ClusterRole"), "deployments", "apps") and verbs(rules("ClusterRole"), "jobs", "batch") and verbs(rules("ClusterRole"), "serviceaccounts") and verbs(rules("ClusterRole"), "roles", "rbac.authorization.k8s.io") and verbs(rules("ClusterRole"), "rolebindings", "rbac.authorization.k8s.io") and "list" in verbs(rules("ClusterRole"), "pods") and sorted(verbs(rules("ClusterRole"), "events", "events.k8s.io")) == ["create", "patch"]'
expect default "least privilege: no wildcard, escalate, bind, impersonate, delete on secrets, CRDs or leases" \
    'not any("*" in r["verbs"] or "*" in r["resources"] or "*" in r["apiGroups"] or {"escalate", "bind", "impersonate"} & set(r["verbs"]) for r in rules("ClusterRole")) and not verbs(rules("ClusterRole"), "customresourcedefinitions", "apiextensions.k8s.io") and not verbs(rules("ClusterRole"), "leases", "coordination.k8s.io") and not verbs(rules("ClusterRole"), "events")'
expect default "no Role, no leader-election objects, no ServiceMonitor" \
    'not find("Role") and not find("RoleBinding") and not find("ServiceMonitor")'
expect default "off by default: NetworkPolicy, PrometheusRule, PodMonitor, dashboard; no --runner-resources" \
    'not (find("NetworkPolicy") or find("PrometheusRule") or find("PodMonitor") or find("ConfigMap")) and not any(a.startswith("--runner-resources") for a in args())'

# --- watched namespaces, cluster-wide RBAC -----------------------------------------------------
render watch --set 'watchNamespaces={a,b}'
expect watch "args contain --namespaces=a,b" '"--namespaces=a,b" in args()'
expect watch "RBAC stays a ClusterRole unless rbac.namespaced" 'len(find("ClusterRole")) == 1 and not find("Role")'

# --- namespaced RBAC ------------------------------------------------------------------------------
render namespaced --namespace ops --set rbac.namespaced=true --set 'watchNamespaces={a,b}'
render cluster_ops --namespace ops
expect namespaced "no ClusterRole or ClusterRoleBinding" 'not find("ClusterRole") and not find("ClusterRoleBinding")'
expect namespaced "a Role and RoleBinding in each watched namespace, none elsewhere" \
    'sorted(o["metadata"]["namespace"] for o in find("Role")) == ["a", "b"] and sorted(o["metadata"]["namespace"] for o in find("RoleBinding")) == ["a", "b"]'
expect namespaced "each RoleBinding binds its Role to the SA in the release namespace" \
    'all(b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": one("Role", namespace=b["metadata"]["namespace"])["metadata"]["name"]} and b["subjects"] == [{"kind": "ServiceAccount", "name": one("ServiceAccount")["metadata"]["name"], "namespace": "ops"}] for b in find("RoleBinding"))'
expect namespaced "secrets verbs exactly [get] in each namespace" \
    'verbs(rules("Role", "a"), "secrets") == ["get"] and verbs(rules("Role", "b"), "secrets") == ["get"]'
expect namespaced "args contain --namespaces=a,b" '"--namespaces=a,b" in args()'
ns_rules=$("$PY" -c 'import sys, yaml; print(yaml.safe_dump([o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "Role"][0]["rules"]))' "$T/namespaced.yaml" 2>/dev/null || true)
cl_rules=$("$PY" -c 'import sys, yaml; print(yaml.safe_dump([o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o["kind"] == "ClusterRole"][0]["rules"]))' "$T/cluster_ops.yaml" 2>/dev/null || true)
if [ -n "$ns_rules" ] && [ "$ns_rules" = "$cl_rules" ]; then
    ok "namespaced: each Role has the ClusterRole's rules"
else
    ko "namespaced: each Role has the ClusterRole's rules" "$(diff <(echo "$cl_rules") <(echo "$ns_rules") || true)"
fi
reject "rbac.namespaced without watchNamespaces is refused" "rbac.namespaced=true needs watchNamespaces" \
    --set rbac.namespaced=true

# --- leader election -------------------------------------------------------------------------------
render leader --namespace ops --set leaderElection.enabled=true --set leaderElection.leaseName=dcs-lock --set replicaCount=3
expect leader "args contain --leader-election and the lease name" \
    '"--leader-election" in args() and "--leader-election-lease=dcs-lock" in args() and one("Deployment")["spec"]["replicas"] == 3'
expect leader "no Recreate strategy with leader election" '"strategy" not in one("Deployment")["spec"]'
expect leader "a Role in the release namespace for exactly that Lease, bound to the SA" \
    'one("Role", namespace="ops")["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["dcs-lock"], "verbs": ["get", "update"]}, {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}] and one("RoleBinding", namespace="ops")["roleRef"]["name"] == one("Role", namespace="ops")["metadata"]["name"] and one("RoleBinding", namespace="ops")["subjects"][0]["namespace"] == "ops"'
expect leader "the ClusterRole still grants no leases" 'not verbs(rules("ClusterRole"), "leases", "coordination.k8s.io")'
render leader_ns --namespace ops --set leaderElection.enabled=true --set rbac.namespaced=true --set 'watchNamespaces={a}'
expect leader_ns "namespaced + leader election: Roles in a and ops only" \
    'sorted(o["metadata"]["namespace"] for o in find("Role")) == ["a", "ops"] and not find("ClusterRole")'
reject "replicaCount > 1 without leader election is refused with a clear message" \
    "replicaCount is 2 but leaderElection.enabled is false" --set replicaCount=2

# --- metrics ------------------------------------------------------------------------------------------
render monitor --set metrics.serviceMonitor.enabled=true --set metrics.serviceMonitor.interval=15s \
    --set metrics.serviceMonitor.labels.release=prom --set metrics.port=9100
expect monitor "ServiceMonitor when enabled, scraping the metrics Service" \
    'one("ServiceMonitor")["apiVersion"] == "monitoring.coreos.com/v1" and one("ServiceMonitor")["spec"]["endpoints"][0] == {"port": "metrics", "path": "/metrics", "interval": "15s", "honorLabels": True} and one("ServiceMonitor")["metadata"]["labels"]["release"] == "prom" and all(one("Service")["metadata"]["labels"].get(k) == v for k, v in one("ServiceMonitor")["spec"]["selector"]["matchLabels"].items())'
expect monitor "metrics.port reaches the flag, the container port and the Service" \
    '"--metrics-addr=0.0.0.0:9100" in args() and container()["ports"][0]["containerPort"] == 9100 and one("Service")["spec"]["ports"][0]["port"] == 9100'
render ownip --set 'metrics.address=$(POD_IP)' --set metrics.port=9100
expect ownip "metrics.address \$(POD_IP) binds the operator to its pod's address (expanded by Kubernetes from POD_IP)" \
    '"--metrics-addr=$(POD_IP):9100" in args() and {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container()["env"]'
reject "a metrics.address with a port is refused" "address" --set 'metrics.address=0.0.0.0:80'
render nosvc --set metrics.service.enabled=false
expect nosvc "no Service when metrics.service.enabled=false" 'not find("Service") and not find("ServiceMonitor")'
reject "ServiceMonitor without the Service is refused" "needs metrics.service.enabled" \
    --set metrics.serviceMonitor.enabled=true --set metrics.service.enabled=false

# --- runner defaults, alerts, dashboard ---------------------------------------------------------------
render runner --set-json 'runner.resources={"requests":{"cpu":"200m","memory":"256Mi"},"limits":{"memory":"1Gi"}}'
expect runner "runner.resources reaches --runner-resources as JSON" \
    '[json.loads(a.split("=", 1)[1]) for a in args() if a.startswith("--runner-resources=")] == [{"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}]'
render allow --set-json 'runner.allowedImages=["registry.example/dcs-runner:*","mirror/dcs:2"]' \
    --set-json 'runner.allowedServiceAccounts=["dcs-runner"]'
expect allow "runner.allowedImages and allowedServiceAccounts reach their flags" \
    '"--allowed-runner-images=registry.example/dcs-runner:*,mirror/dcs:2" in args() and "--allowed-runner-service-accounts=dcs-runner" in args()'
expect default "nothing allowed beyond the chart's runner image by default" \
    'not any(a.startswith("--allowed-runner") for a in args())'
reject "an allowed image with a comma is refused" "allowedImages" --set-json 'runner.allowedImages=["a,b"]'
render podip --set 'runner.metricsAddr=$(POD_IP):19464'
expect podip "runner.metricsAddr \$(POD_IP):PORT is passed with \$\$( so Kubernetes does not expand it in the operator's args" \
    '[a for a in args() if a.startswith("--runner-metrics-addr")] == ["--runner-metrics-addr=$$(POD_IP):19464"]'
render observe --namespace ops --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true \
    --set runner.podMonitor.enabled=true --set metrics.serviceMonitor.enabled=true \
    --set prometheusRule.labels.release=prom --set prometheusRule.alertLabels.team=data \
    --set prometheusRule.lagSeconds=120 --set prometheusRule.lagFor=3m \
    --set prometheusRule.runbookBaseUrl=https://example.com/charts/README.md
alerts='[r for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]'
expect observe "PrometheusRule: the ten alerts, each with severity, team, summary, description, runbook" \
    "sorted(r['alert'] for r in $alerts) == sorted(['DcsSyncNearExpiry', 'DcsSyncOffsetExpired', 'DcsSyncLagHigh', 'DcsSyncSinkUnhealthy', 'DcsSinkLoadsRetrying', 'DcsSinkRowsRejected', 'DcsRunnerCrashLooping', 'DcsSyncReinitialized', 'DcsSyncNotReady', 'DcsOperatorAbsent']) and all(r['labels']['severity'] in ('warning', 'critical') and r['labels']['team'] == 'data' and r['annotations']['summary'] and len(r['annotations']['description']) > 80 and r['annotations']['runbook_url'] == 'https://example.com/charts/README.md#' + r['alert'].lower() for r in $alerts)"
expect observe "PrometheusRule labels for the ruleSelector, lag threshold and duration from values" \
    "one('PrometheusRule')['metadata']['labels']['release'] == 'prom' and [(r['expr'], r['for']) for r in $alerts if r['alert'] == 'DcsSyncLagHigh'] == [('dcs_sync_lag_seconds > 120', '3m')]"
expect observe "every alert has a runbook paragraph in charts/README.md" \
    "all(re.search(r'^#+ ' + r['alert'] + r'\s*$', open('README.md').read(), re.M) for r in $alerts)"
expect observe "the alerts' templates are Prometheus's, not Helm's (\$labels survive the render)" \
    "all('{{ \$labels.namespace }}' in r['annotations']['description'] for r in $alerts if r['alert'] != 'DcsOperatorAbsent') and 'namespace=\"ops\"' in [r for r in $alerts if r['alert'] == 'DcsOperatorAbsent'][0]['expr']"
# metrics_check RENDERED: every metric of the alerts and panels exported, every condition type,
# reason and status they match on defined in the code.
metrics_check() {
    "$PY" metrics_check.py "$1" --source ../operator/src/metrics.rs ../runner/src/metrics.rs \
        --values ../crds/src/conditions.rs ../operator/src/probe.rs
}
if out=$(metrics_check "$T/observe.yaml" 2>&1); then
    ok "observe: every metric in the alerts and the dashboard is one operator/src/metrics.rs or runner/src/metrics.rs exports, every condition value one the code defines"
else
    ko "observe: every metric in the alerts and the dashboard is one operator/src/metrics.rs or runner/src/metrics.rs exports, every condition value one the code defines" "$out"
fi
# tampered NAME SED DESCRIPTION EXPECTED: the check fails on the render edited by SED, with EXPECTED.
tampered() {
    sed "$2" "$T/observe.yaml" >"$T/$1.yaml"
    if out=$(metrics_check "$T/$1.yaml" 2>&1); then
        ko "$3" "$out"
    elif grep -qF "$4" <<<"$out"; then
        ok "$3"
    else
        ko "$3" "$out"
    fi
}
tampered lag_typo 's/dcs_sync_lag_seconds >/dcs_sync_lag_secondz >/' \
    "the metric check fails on a metric nobody exports, naming alert and metric" \
    "alert DcsSyncLagHigh: dcs_sync_lag_secondz is not exported"
tampered reason_typo 's/reason="NearExpiry"/reason="NearlyExpired"/' \
    "the metric check fails on a condition reason the operator never writes, naming alert and reason" \
    "alert DcsSyncNearExpiry: dcs_sync_condition: no reason 'NearlyExpired' is defined in the code"
tampered type_typo 's/type="SinkHealthy"/type="SinkHealth"/' \
    "the metric check fails on a condition type that does not exist" \
    "alert DcsSyncSinkUnhealthy: dcs_sync_condition: no type 'SinkHealth' is defined in the code"
dash='json.loads(one("ConfigMap")["data"]["dcs.json"])'
expect observe "dashboard ConfigMap: sidecar label grafana_dashboard=1, in the release namespace" \
    'one("ConfigMap")["metadata"]["labels"]["grafana_dashboard"] == "1" and one("ConfigMap")["metadata"]["namespace"] == "ops" and list(one("ConfigMap")["data"]) == ["dcs.json"]'
expect observe "dashboard: a uid, unique panel ids, every query on the \${datasource} variable, panels inside 24 columns" \
    "$dash['uid'] == 'dcs-overview' and len({p['id'] for p in $dash['panels']}) == len($dash['panels']) and all(p['datasource']['uid'] == '\${datasource}' and all(t['datasource']['uid'] == '\${datasource}' for t in p['targets']) for p in $dash['panels'] if p['type'] != 'row') and all(p['gridPos']['x'] + p['gridPos']['w'] <= 24 for p in $dash['panels']) and [v['name'] for v in $dash['templating']['list']] == ['datasource', 'namespace', 'sync']"
expect observe "dashboard: the operator's and the runners' metrics both shown" \
    "any('dcs_sync_lag_seconds' in t['expr'] for p in $dash['panels'] for t in p.get('targets', [])) and any('dcs_rows_written_total' in t['expr'] for p in $dash['panels'] for t in p.get('targets', []))"
render dashns --set grafanaDashboard.enabled=true --set grafanaDashboard.namespace=monitoring \
    --set grafanaDashboard.annotations.grafana_folder=Data --set-json 'grafanaDashboard.labels={"dash":"yes"}'
expect dashns "dashboard: namespace, annotations and more labels from values (Helm merges them with the sidecar's)" \
    'one("ConfigMap")["metadata"]["namespace"] == "monitoring" and one("ConfigMap")["metadata"]["annotations"] == {"grafana_folder": "Data"} and one("ConfigMap")["metadata"]["labels"]["dash"] == "yes" and one("ConfigMap")["metadata"]["labels"]["grafana_dashboard"] == "1"'
expect observe "PodMonitor selects runner pods (build.rs labels) on their metrics port, in every namespace" \
    'selects(one("PodMonitor")["spec"]["selector"], runner_labels) and not selects(one("PodMonitor")["spec"]["selector"], one("Deployment")["spec"]["template"]["metadata"]["labels"]) and one("PodMonitor")["spec"]["podMetricsEndpoints"] == [{"port": runner_port_name, "path": "/metrics", "interval": "30s"}] and one("PodMonitor")["spec"]["namespaceSelector"] == {"any": True}'
expect observe "ServiceMonitor keeps the syncs' namespace label (honorLabels)" \
    'one("ServiceMonitor")["spec"]["endpoints"][0]["honorLabels"] is True'
render podmon_ns --set runner.podMonitor.enabled=true --set 'watchNamespaces={a,b}'
expect podmon_ns "PodMonitor looks only in watchNamespaces when set" \
    'one("PodMonitor")["spec"]["namespaceSelector"] == {"matchNames": ["a", "b"]}'

# --- network policies -----------------------------------------------------------------------------------
np_values=(--set networkPolicy.enabled=true --set 'networkPolicy.apiServer.cidrs={10.0.0.1/32,192.168.1.10/32}'
    --set 'networkPolicy.doris.cidrs={10.1.0.0/16}' --set 'watchNamespaces={a,b}')
render netpol --namespace ops "${np_values[@]}" \
    --set-json 'networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]'
op_np='one("NetworkPolicy", namespace="ops")'
ports='lambda rule: sorted((p["port"], p["protocol"]) for p in rule["ports"])'
expect netpol "one policy for the operator (release namespace), one per watched namespace for the runners" \
    'sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in find("NetworkPolicy")) == [("a", "dcs-operator-runners"), ("b", "dcs-operator-runners"), ("ops", "dcs-operator")]'
expect netpol "the operator's policy selects the operator's pods and no runner pod" \
    "selects($op_np['spec']['podSelector'], one('Deployment')['spec']['template']['metadata']['labels']) and not selects($op_np['spec']['podSelector'], runner_labels)"
expect netpol "the runners' policies select the pods build.rs labels, not the operator's" \
    'all(selects(o["spec"]["podSelector"], dict(runner_labels, **{"dcs.dev/sync": "any"})) and not selects(o["spec"]["podSelector"], one("Deployment")["spec"]["template"]["metadata"]["labels"]) for o in find("NetworkPolicy", name="dcs-operator-runners"))'
expect netpol "both directions are policed; ingress only on the metrics port, from metricsFrom" \
    "all(o['spec']['policyTypes'] == ['Ingress', 'Egress'] and o['spec']['ingress'] == [{'ports': [{'port': 'metrics', 'protocol': 'TCP'}], 'from': [{'namespaceSelector': {'matchLabels': {'kubernetes.io/metadata.name': 'monitoring'}}}]}] for o in find('NetworkPolicy')) and runner_port_name == 'metrics'"
expect netpol "operator egress: API server, DNS (UDP+TCP), Doris FE HTTP + query port and BE HTTP" \
    "[(r['to'], ($ports)(r)) for r in $op_np['spec']['egress']] == [([{'ipBlock': {'cidr': '10.0.0.1/32'}}, {'ipBlock': {'cidr': '192.168.1.10/32'}}], [(443, 'TCP'), (6443, 'TCP')]), ([{'namespaceSelector': {'matchLabels': {'kubernetes.io/metadata.name': 'kube-system'}}, 'podSelector': {'matchLabels': {'k8s-app': 'kube-dns'}}}], [(53, 'TCP'), (53, 'UDP')]), ([{'ipBlock': {'cidr': '10.1.0.0/16'}}], [(8030, 'TCP'), (8040, 'TCP'), (9030, 'TCP')])]"
expect netpol "runner egress: the same plus Flight SQL at the FEs and BEs" \
    "all([($ports)(r) for r in o['spec']['egress']][2] == [(8030, 'TCP'), (8040, 'TCP'), (8050, 'TCP'), (8070, 'TCP'), (9030, 'TCP')] and o['spec']['egress'][:2] == $op_np['spec']['egress'][:2] for o in find('NetworkPolicy', name='dcs-operator-runners'))"
render netpol_ports "${np_values[@]}" --set networkPolicy.runnerNamespaces='{c}' --set networkPolicy.dns.enabled=false \
    --set networkPolicy.doris.fe.queryPort=19030 --set networkPolicy.doris.be.flightSqlPort=18050 --set 'networkPolicy.apiServer.ports={443}'
expect netpol_ports "runnerNamespaces wins over watchNamespaces; ports from values; DNS off" \
    "[o['metadata']['namespace'] for o in find('NetworkPolicy', name='dcs-operator-runners')] == ['c'] and [($ports)(r) for r in one('NetworkPolicy', name='dcs-operator-runners')['spec']['egress']] == [[(443, 'TCP')], [(8030, 'TCP'), (8040, 'TCP'), (8070, 'TCP'), (18050, 'TCP'), (19030, 'TCP')]] and 'from' not in one('NetworkPolicy', name='dcs-operator')['spec']['ingress'][0]"
reject "networkPolicy without the API server's addresses is refused" "needs networkPolicy.apiServer.cidrs" \
    --set networkPolicy.enabled=true --set 'networkPolicy.doris.cidrs={10.1.0.0/16}' --set 'watchNamespaces={a}'
reject "networkPolicy without Doris's addresses is refused" "needs networkPolicy.doris.cidrs" \
    --set networkPolicy.enabled=true --set 'networkPolicy.apiServer.cidrs={10.0.0.1/32}' --set 'watchNamespaces={a}'
reject "networkPolicy without namespaces for the runners is refused" "needs networkPolicy.runnerNamespaces or watchNamespaces" \
    --set networkPolicy.enabled=true --set 'networkPolicy.apiServer.cidrs={10.0.0.1/32}' --set 'networkPolicy.doris.cidrs={10.1.0.0/16}'

# --- images, service account, rbac.create, extras ------------------------------------------------------
render custom --release my-dcs --namespace team --set image.repository=reg.example/dcs-operator \
    --set image.tag=1.2.3 --set image.pullPolicy=Always --set runnerImage.repository=reg.example/dcs-runner \
    --set runnerImage.tag=9.9.9 --set logFormat=text --set 'extraArgs={--foo=bar}' \
    --set-json 'extraEnv=[{"name":"RUST_LOG","value":"debug"}]' --set 'imagePullSecrets[0].name=regcred' \
    --set podLabels.team=x --set podAnnotations.note=y --set nodeSelector.disk=ssd \
    --set-json 'tolerations=[{"key":"k","operator":"Exists"}]' --set serviceAccount.annotations.role=z
expect custom "image, pull policy and runner image overrides" \
    'container()["image"] == "reg.example/dcs-operator:1.2.3" and container()["imagePullPolicy"] == "Always" and "--runner-image=reg.example/dcs-runner:9.9.9" in args() and "--log-format=text" in args()'
expect custom "extraArgs appended after the chart's flags, extraEnv after POD_*" \
    'args()[-1] == "--foo=bar" and [e["name"] for e in container()["env"]] == ["POD_NAME", "POD_NAMESPACE", "POD_IP", "RUST_LOG"]'
expect custom "release name and namespace used for names and namespaces" \
    'one("Deployment")["metadata"]["name"] == "my-dcs-dcs-operator" and one("Deployment")["metadata"]["namespace"] == "team" and one("ClusterRoleBinding")["subjects"][0]["namespace"] == "team"'
expect custom "pod labels/annotations, pull secrets, nodeSelector, tolerations, SA annotations" \
    'one("Deployment")["spec"]["template"]["metadata"]["labels"]["team"] == "x" and one("Deployment")["spec"]["template"]["metadata"]["annotations"] == {"note": "y"} and one("Deployment")["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}] and one("Deployment")["spec"]["template"]["spec"]["nodeSelector"] == {"disk": "ssd"} and one("Deployment")["spec"]["template"]["spec"]["tolerations"][0]["key"] == "k" and one("ServiceAccount")["metadata"]["annotations"] == {"role": "z"}'
render ownsa --set serviceAccount.create=false --set serviceAccount.name=existing
expect ownsa "serviceAccount.create=false: no SA, the named one is used and bound" \
    'not find("ServiceAccount") and one("Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "existing" and one("ClusterRoleBinding")["subjects"][0]["name"] == "existing"'
render norbac --set rbac.create=false --set leaderElection.enabled=true
expect norbac "rbac.create=false: no RBAC objects at all" \
    'not (find("ClusterRole") or find("ClusterRoleBinding") or find("Role") or find("RoleBinding"))'

# --- schema ----------------------------------------------------------------------------------------------
reject "schema rejects an unknown top-level key, naming it" "additional propert.*bogusKey" --set bogusKey=1
reject "schema rejects an unknown nested key, naming it" "/image.*additional propert.*tagg" --set image.tagg=1
reject "schema rejects a wrong type, naming the key" "/replicaCount.*got string, want integer" --set replicaCount=two
reject "schema rejects a bad enum, naming the key" "/logFormat" --set logFormat=xml
reject "schema rejects a bad namespace name, naming the key" "/watchNamespaces/0" --set 'watchNamespaces={Bad_NS}'
reject "schema rejects a port out of range, naming the key" "/metrics/port" --set metrics.port=70000
reject "schema rejects a runner quantity that is none, naming the key" "/runner/resources/limits/memory" \
    --set runner.resources.limits.memory=lots
reject "schema rejects an unknown runner.resources key, naming it" "/runner/resources.*additional propert.*limit" \
    --set runner.resources.limit.memory=1Gi
reject "schema rejects a runner metrics host that is no IP nor \$(POD_IP), naming the key" "/runner/metricsAddr" \
    --set runner.metricsAddr=localhost:9464
reject "schema rejects a runner metrics port out of range, naming the key" "/runner/metricsAddr" \
    --set 'runner.metricsAddr=0.0.0.0:70000'
reject "schema rejects a CIDR that is none, naming the key" "/networkPolicy/doris/cidrs/0" \
    --set 'networkPolicy.doris.cidrs={doris-fe}'
reject "schema rejects a lag threshold that is not a number, naming the key" "/prometheusRule/lagSeconds" \
    --set prometheusRule.lagSeconds=soon
reject "schema rejects an unknown dashboard key, naming it" "/grafanaDashboard.*additional propert.*folder" \
    --set grafanaDashboard.folder=x

# --- Argo CD health check ---------------------------------------------------------------------------------
render argocd --namespace ops --set argocdHealthCheck.enabled=true
expect argocd "argocdHealthCheck: a ConfigMap in the release namespace holding only argocd-cm's health key for dcs.dev/DorisChangelogSync" \
    'one("ConfigMap", name="dcs-operator-argocd-health", namespace="ops") and list(one("ConfigMap")["data"]) == ["resource.customizations.health.dcs.dev_DorisChangelogSync"]'
expect argocd "argocdHealthCheck: the key holds health.lua (the script tests/gitops-health checks) byte for byte" \
    'one("ConfigMap")["data"]["resource.customizations.health.dcs.dev_DorisChangelogSync"] == open("dcs-operator/health.lua").read().rstrip("\n")'
expect default "no Argo CD health ConfigMap by default" 'not find("ConfigMap", name="dcs-operator-argocd-health")'
reject "schema rejects an unknown argocdHealthCheck key, naming it" "/argocdHealthCheck.*additional propert.*namespace" \
    --set argocdHealthCheck.namespace=argocd

# --- CRDs and NOTES ------------------------------------------------------------------------------------------
render crds --include-crds
expect crds "--include-crds puts the CRD first, parsed equal to crds/dorischangelogsyncs.yaml" \
    'objs[0]["kind"] == "CustomResourceDefinition" and objs[0] == crd_file and len(find("CustomResourceDefinition")) == 1'
expect crds "--include-crds prints crds/dorischangelogsyncs.yaml byte for byte" \
    '("# Source: dcs-operator/crds/dorischangelogsyncs.yaml\n" + crd_text.strip("\n") + "\n") in open(path).read()'
expect default "without --include-crds there is no CRD" 'not find("CustomResourceDefinition")'
# NOTES.txt is rendered by an install (client-side dry run), not by `helm template`.
if notes=$("$HELM" install r1 "$CHART" --dry-run=client --namespace ops --set 'watchNamespaces={a,b}' 2>&1) &&
    notes=$(sed -n '/^NOTES:/,$p' <<<"$notes") &&
    grep -q "namespaces a, b" <<<"$notes" && grep -q "deployment/r1-dcs-operator" <<<"$notes"; then
    ok "NOTES.txt renders with the release's names"
else
    ko "NOTES.txt renders with the release's names" "$notes"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
