#!/usr/bin/env bash
# The dcs end-to-end suite: black-box scenarios driven with kubectl, mysql, curl and jq.
#
#   e2e/run.sh                 every scenario, against the test bed's control plane (genuine
#                              Kubernetes, tests/kube-bed, with the process kubelet) + doris-emu
#   e2e/run.sh streaming ...   only the named scenarios (see SCENARIOS in e2e/scenarios.sh)
#
# Environment (see e2e/README.md):
#   E2E_KUBECONFIG        run against this cluster instead of the test bed's (e.g. kind)
#   E2E_DORIS_HOST        address doris-emu listens on and that pods use to reach it
#                         (default 127.0.0.1; required with E2E_KUBECONFIG)
#   E2E_IMAGE_TAG         tag of the operator and runner images with E2E_KUBECONFIG (default dev)
#   E2E_OPERATOR_IMAGE    operator image repository (default dcs-operator)
#   E2E_RUNNER_IMAGE      runner image repository (default dcs-runner)
#   E2E_SKIP_BUILD=1      do not build (use the binaries in target/: $CARGO_TARGET_DIR/debug and
#                         $DCS_GO_TOOLS_DIR when set)
#   E2E_WRITE_GITOPS_FIXTURES=1
#                         (re)write tests/gitops-health/testdata/ from the live syncs of the
#                         scenarios that check their GitOps health (gitops_check in e2e/lib.sh)
#   E2E_KEEP=1            keep the work directory (emulator logs) after the run
#
# Prints `N passed, N failed` and exits non-zero when a scenario failed.
set -euo pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$E2E_DIR")
cd "$ROOT"
# shellcheck source=e2e/lib.sh
source "$E2E_DIR/lib.sh"
# shellcheck source=e2e/scenarios.sh
source "$E2E_DIR/scenarios.sh"

SUITE_START=$SECONDS
WORK=$(mktemp -d -t dcs-e2e.XXXXXX)
OPERATOR_NAMESPACE=dcs-system
RELEASE=dcs-operator
DORIS_USER=root
DORIS_PASSWORD=e2e-secret
DORIS_HOST=${E2E_DORIS_HOST:-127.0.0.1}
E2E_NAMESPACES=()
CREATED_OPERATOR_NAMESPACE=""
KUBE_BED_PID=""
log_follower=""
DORIS_EMU_PID=""
export DORIS_HOST DORIS_USER DORIS_PASSWORD OPERATOR_NAMESPACE

# stop PID NAME: SIGTERM, up to 30 s for it to exit (the bed stops its pods, then the control
# plane), then SIGKILL.
stop() {
    local pid=$1 name=$2 i
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    log "$name did not stop on SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
}

on_exit() {
    local rc=$?
    set +e
    if [[ -n "${E2E_KUBECONFIG:-}" && -n "${HELM:-}" ]]; then
        for ns in "${E2E_NAMESPACES[@]}"; do kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1; done
        "$HELM" uninstall "$RELEASE" --namespace "$OPERATOR_NAMESPACE" >/dev/null 2>&1
        [[ -z "$CREATED_OPERATOR_NAMESPACE" ]] || kubectl delete namespace "$OPERATOR_NAMESPACE" --wait=false >/dev/null 2>&1
    fi
    [[ -z "${log_follower:-}" ]] || kill "$log_follower" 2>/dev/null
    stop "$KUBE_BED_PID" "the test bed"
    stop "$DORIS_EMU_PID" doris-emu
    if [[ -n "${E2E_KEEP:-}" || $rc -ne 0 && -z "${CI:-}" ]]; then
        log "work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# first_line FILE TIMEOUT: waits for the JSON line an emulator prints on start.
first_line() {
    local file=$1 timeout=$2 pid=$3 deadline=$((SECONDS + $2))
    while ! [[ -s "$file" ]] || ! head -n 1 "$file" | jq -e . >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { log "process $pid exited before it was ready"; return 1; }
        ((SECONDS < deadline)) || { log "no start line in $file after ${timeout}s"; return 1; }
        sleep 0.1
    done
    head -n 1 "$file"
}

# ------------------------------------------------------------------------------------------ build
if [[ -z "${E2E_SKIP_BUILD:-}" ]]; then
    log "building the binaries"
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo build -q \
        -p dcs-operator -p dcs-runner -p dcs-kube-bed -p dcs-doris-emu --bins
    "$ROOT/tests/go-tools/build.sh" all
fi
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug
GO_TOOLS=${DCS_GO_TOOLS_DIR:-$ROOT/target}
HELM=${HELM:-$GO_TOOLS/helm/bin/helm}
GITOPS_HEALTH=${GITOPS_HEALTH:-$GO_TOOLS/gitops-health/bin/gitops-health}
export GITOPS_HEALTH
for b in dcs-operator dcs-runner dcs-kube-bed dcs-doris-emu; do
    [[ -x "$BIN/$b" ]] || { log "missing $BIN/$b (run without E2E_SKIP_BUILD)"; exit 2; }
done
for tool in kubectl mysql curl jq python3 "$HELM" "$GITOPS_HEALTH"; do
    command -v "$tool" >/dev/null || { log "missing tool: $tool"; exit 2; }
done

# ------------------------------------------------------------------------------------------ doris-emu
if [[ -n "${E2E_KUBECONFIG:-}" && -z "${E2E_DORIS_HOST:-}" ]]; then
    log "E2E_KUBECONFIG is set: set E2E_DORIS_HOST to an address of this host that the cluster's pods reach (see e2e/README.md)"
    exit 2
fi
DORIS_EMU_PASSWORD=$DORIS_PASSWORD "$BIN/dcs-doris-emu" --host "$DORIS_HOST" --user "$DORIS_USER" \
    --fe-http-port 0 --be-http-port 0 --query-port 0 --fe-flight-port 0 --be-flight-port 0 \
    >"$WORK/doris-emu.json" 2>"$WORK/doris-emu.log" &
DORIS_EMU_PID=$!
ports=$(first_line "$WORK/doris-emu.json" 30 "$DORIS_EMU_PID") || { tail -n 20 "$WORK/doris-emu.log" >&2; exit 2; }
DORIS_FE_HTTP_PORT=$(jq -r .fe_http_port <<<"$ports")
DORIS_BE_HTTP_PORT=$(jq -r .be_http_port <<<"$ports")
DORIS_QUERY_PORT=$(jq -r .query_port <<<"$ports")
DORIS_FE_FLIGHT_PORT=$(jq -r .fe_flight_port <<<"$ports")
export DORIS_FE_HTTP_PORT DORIS_BE_HTTP_PORT DORIS_QUERY_PORT DORIS_FE_FLIGHT_PORT
log "doris-emu on $DORIS_HOST: $ports"

# ------------------------------------------------------------------------------------------ cluster
if [[ -n "${E2E_KUBECONFIG:-}" ]]; then
    export KUBECONFIG=$E2E_KUBECONFIG
    TAG=${E2E_IMAGE_TAG:-dev}
    log "against the cluster of $KUBECONFIG ($(kubectl config current-context))"
else
    export KUBECONFIG=$WORK/kubeconfig
    TAG=e2e
    # Pods run as their runAsUser (the runner's is 65532): what they read must be reachable.
    chmod 755 "$WORK"
    # The adversarial scenario's runner pods reach the API server through the bed's fault proxy
    # (its class fence-ambiguous-save loses the answer of a checkpoint save the server applied).
    "$BIN/dcs-kube-bed" --dir "$WORK/kube" --kubeconfig "$KUBECONFIG" --kubelet \
        --image-map "dcs-operator=$BIN/dcs-operator" --image-map "dcs-runner=$BIN/dcs-runner" \
        --pod-api-proxy e2e-adversarial \
        >"$WORK/kube-bed.json" 2>"$WORK/kube-bed.log" &
    KUBE_BED_PID=$!
    first_line "$WORK/kube-bed.json" 300 "$KUBE_BED_PID" >/dev/null || { tail -n 20 "$WORK/kube-bed.log" >&2; exit 2; }
    log "control plane and kubelet ($((SECONDS - SUITE_START)) s): $(head -n 1 "$WORK/kube-bed.json")"
    POD_API_PROXY=$(head -n 1 "$WORK/kube-bed.json" | jq -r '.pod_api_proxy.control // ""')
    export POD_API_PROXY
fi
# The Prometheus Operator's CRDs (generated from its API module by tests/go-tools/build.sh), so the
# chart's ServiceMonitor, PodMonitor and PrometheusRule go to the API server and are checked against
# their genuine schemas. On another cluster they are used when it has them, never installed.
PROMETHEUS_CRDS=""
if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
    [[ -d "$GO_TOOLS/prometheus-crds/crds" ]] || "$ROOT/tests/go-tools/build.sh" prometheus-crds
    kubectl apply --server-side -f "$GO_TOOLS/prometheus-crds/crds" >/dev/null
    wait_for "the Prometheus Operator's CRDs established" 60 crds_established \
        servicemonitors.monitoring.coreos.com podmonitors.monitoring.coreos.com \
        prometheusrules.monitoring.coreos.com
fi
if kubectl get crd servicemonitors.monitoring.coreos.com podmonitors.monitoring.coreos.com \
    prometheusrules.monitoring.coreos.com >/dev/null 2>&1; then
    PROMETHEUS_CRDS=1
fi
export PROMETHEUS_CRDS
OPERATOR_IMAGE=${E2E_OPERATOR_IMAGE:-dcs-operator}
RUNNER_IMAGE=${E2E_RUNNER_IMAGE:-dcs-runner}

# ------------------------------------------------------------------------------------------ install
CHART=charts/dcs-operator
if ! kubectl get namespace "$OPERATOR_NAMESPACE" >/dev/null 2>&1; then
    kubectl create namespace "$OPERATOR_NAMESPACE" >/dev/null
    CREATED_OPERATOR_NAMESPACE=1
fi
# On the process kubelet pods share the host's network: a free port for the operator's metrics, not
# 8080, and one for the runners' (each runner on its pod's address), not 9464, which any process of
# the host (a test's runner) may hold on every address. The operator binds its pod's address too:
# two replicas (ha_namespaced) would otherwise contend for one port on every address, and the
# leader's /metrics could be served by the other replica.
METRICS_PORT=8080
RUNNER_METRICS_PORT=9464
runner_metrics=()
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
    METRICS_PORT=$(free_port)
    RUNNER_METRICS_PORT=$(free_port)
    runner_metrics=(--set "runner.metricsAddr=\$(POD_IP):$RUNNER_METRICS_PORT" --set "metrics.address=\$(POD_IP)")
fi
export RUNNER_METRICS_PORT
# helm_operator VERB [HELM ARGS...]: `helm VERB` (install, upgrade) of the chart as release
# $RELEASE in $OPERATOR_NAMESPACE with this run's images, metrics port and text logs, plus ARGS.
helm_operator() {
    local verb=$1
    shift
    "$HELM" "$verb" "$RELEASE" "$CHART" --namespace "$OPERATOR_NAMESPACE" \
        --set "image.repository=$OPERATOR_IMAGE" --set "image.tag=$TAG" --set "metrics.port=$METRICS_PORT" \
        --set "runnerImage.repository=$RUNNER_IMAGE" --set "runnerImage.tag=$TAG" \
        --set logFormat=text --set-json 'extraEnv=[{"name":"NO_COLOR","value":"1"}]' "${runner_metrics[@]}" "$@"
}

# operator_pods_ready N: at least N operator pods, not being deleted, are Ready.
operator_pods_ready() {
    kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator -o json |
        jq -e --argjson n "${1:-1}" '[.items[] | select(.metadata.deletionTimestamp == null)
                | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length >= $n' >/dev/null
}

# operator_pod_uids: the uids of the operator pods not being deleted.
operator_pod_uids() {
    kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator -o json |
        jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.uid] | sort | join(" ")'
}

log "installing the operator with helm install (the chart's CRD, RBAC, Deployment)"
helm_operator install >"$WORK/helm-install.log" || { cat "$WORK/helm-install.log" >&2; exit 1; }
wait_for "the DorisChangelogSync CRD established" 60 crds_established dorischangelogsyncs.dcs.dev
if ! (wait_for "the operator pod Ready" 90 operator_pods_ready 1); then
    dump_operator
    exit 1
fi
log "operator ready ($((SECONDS - SUITE_START)) s after start)"
# helm upgrade with a changed value rolls the operator: a new pod carrying it replaces the old.
first_uids=$(operator_pod_uids)
log "helm upgrade --set podAnnotations.dcs-e2e/upgraded=yes (the Deployment must roll)"
helm_operator upgrade --set-string 'podAnnotations.dcs-e2e/upgraded=yes' >"$WORK/helm-upgrade.log" ||
    { cat "$WORK/helm-upgrade.log" >&2; exit 1; }
upgraded_pod_ready() {
    local uids
    uids=$(operator_pod_uids)
    [[ -n "$uids" && " $uids " != *" $first_uids "* ]] || return 1
    kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator -o json |
        jq -e '[.items[] | select(.metadata.deletionTimestamp == null)] | length == 1 and
            (.[0].metadata.annotations["dcs-e2e/upgraded"] == "yes") and
            any(.[0].status.conditions[]?; .type == "Ready" and .status == "True")' >/dev/null
}
if ! (wait_for "the upgraded operator pod (annotation dcs-e2e/upgraded) Ready, the old one gone" 120 upgraded_pod_ready); then
    dump_operator
    exit 1
fi
[[ "$("$HELM" status "$RELEASE" -n "$OPERATOR_NAMESPACE" -o json | jq -r .version)" == 2 ]] ||
    { log "helm status does not report revision 2 after the upgrade"; exit 1; }
log "operator rolled by helm upgrade ($((SECONDS - SUITE_START)) s after start)"
# The operator's identity is the chart's ServiceAccount, held to the chart's RBAC: it may read a
# Secret by name but not list Secrets cluster-wide, nor touch Nodes.
OPERATOR_SA=$(kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator \
    -o jsonpath='{.items[0].spec.serviceAccountName}')
AS="system:serviceaccount:$OPERATOR_NAMESPACE:$OPERATOR_SA"
if kubectl --as="$AS" get nodes >/dev/null 2>&1 || kubectl --as="$AS" get secrets -A >/dev/null 2>&1; then
    log "the operator's ServiceAccount $AS may list Nodes or Secrets: RBAC is not what the chart grants"
    exit 1
fi
kubectl --as="$AS" get dorischangelogsyncs -A >/dev/null ||
    { log "the operator's ServiceAccount $AS cannot list DorisChangelogSyncs"; exit 1; }

# ------------------------------------------------------------------------------------------ scenarios
# Always in the order of SCENARIOS (ha_namespaced, which reinstalls the operator, comes last).
for s in "$@"; do
    [[ " ${SCENARIOS[*]} " == *" $s "* ]] || { log "unknown scenario: $s (known: ${SCENARIOS[*]})"; exit 2; }
done
selected=()
for s in "${SCENARIOS[@]}"; do
    if (($# == 0)) || [[ " $* " == *" $s "* ]]; then selected+=("$s"); fi
done

passed=0
failed=0
results=()
for s in "${selected[@]}"; do
    ns="e2e-${s//_/-}"
    start=$SECONDS
    log "=== RUN   $s (namespace $ns)"
    follow_logs "$ns" "$WORK/logs/$s" &
    log_follower=$!
    set +e
    (
        set -euo pipefail
        new_namespace "$ns"
        "scenario_$s" "$ns"
    )
    rc=$?
    set -e
    kill "$log_follower" 2>/dev/null || true
    wait "$log_follower" 2>/dev/null || true
    took=$((SECONDS - start))
    if ((rc == 0)); then
        passed=$((passed + 1))
        results+=("PASS  $s (${took}s)")
        log "--- PASS: $s (${took}s)"
    else
        failed=$((failed + 1))
        results+=("FAIL  $s (${took}s)")
        log "--- FAIL: $s (${took}s)"
        dump_namespace "$ns" >&2
        dump_logs "$WORK/logs/$s" >&2
        dump_doris >&2
        dump_operator >&2
    fi
    E2E_NAMESPACES+=("$ns")
    if ! (delete_namespace "$ns"); then
        # Counted as a failure of the scenario: something it created does not go away.
        log "--- FAIL: $s: namespace $ns (or a sync in it) not deleted within 60 s; what is left:"
        kubectl -n "$ns" get dorischangelogsyncs -o yaml >&2 2>&1 || true
        dump_namespace "$ns" >&2
        dump_operator >&2
        if ((rc == 0)); then
            passed=$((passed - 1))
            failed=$((failed + 1))
            results[-1]="FAIL  $s (${took}s; its namespace was not deleted)"
        fi
    fi
done

# helm uninstall removes what the chart installed (the CRD stays, as Helm leaves crds/ alone).
if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
    log "helm uninstall"
    if "$HELM" uninstall "$RELEASE" --namespace "$OPERATOR_NAMESPACE" >/dev/null &&
        (wait_for "the chart's objects gone after helm uninstall" 60 bash -c \
            "[[ -z \$(kubectl -n $OPERATOR_NAMESPACE get deployments,serviceaccounts,services,roles -l app.kubernetes.io/instance=$RELEASE -o name) && -z \$(kubectl get clusterroles,clusterrolebindings -l app.kubernetes.io/instance=$RELEASE -o name) ]]") &&
        kubectl get crd dorischangelogsyncs.dcs.dev >/dev/null; then
        passed=$((passed + 1))
        results+=("PASS  helm uninstall")
    else
        failed=$((failed + 1))
        results+=("FAIL  helm uninstall")
    fi
fi

echo
echo "e2e results ($((SECONDS - SUITE_START)) s in all):"
printf '  %s\n' "${results[@]}"
echo "$passed passed, $failed failed"
((failed == 0))
