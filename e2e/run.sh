#!/usr/bin/env bash
# The dcs end-to-end suite: black-box scenarios driven with kubectl, mysql, curl and jq.
#
#   e2e/run.sh                 every scenario, against kube-emu + doris-emu started here
#   e2e/run.sh streaming ...   only the named scenarios (see SCENARIOS in e2e/scenarios.sh)
#
# Environment (see e2e/README.md):
#   E2E_KUBECONFIG        run against this cluster instead of kube-emu (e.g. kind)
#   E2E_DORIS_HOST        address doris-emu listens on and that pods use to reach it
#                         (default 127.0.0.1; required with E2E_KUBECONFIG)
#   E2E_IMAGE_TAG         tag of the operator and runner images with E2E_KUBECONFIG (default dev)
#   E2E_OPERATOR_IMAGE    operator image repository (default dcs-operator)
#   E2E_RUNNER_IMAGE      runner image repository (default dcs-runner)
#   E2E_SKIP_BUILD=1      do not run cargo build (use the binaries in target/debug)
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
KUBE_EMU_PID=""
log_follower=""
DORIS_EMU_PID=""
export DORIS_HOST DORIS_USER DORIS_PASSWORD OPERATOR_NAMESPACE

# stop PID NAME: SIGTERM, up to 15 s for it to exit (kube-emu stops its pods first), then SIGKILL.
stop() {
    local pid=$1 name=$2 i
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    log "$name did not stop on SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
}

on_exit() {
    local rc=$?
    set +e
    if [[ -n "${E2E_KUBECONFIG:-}" && -f "$WORK/operator.yaml" ]]; then
        for ns in "${E2E_NAMESPACES[@]}"; do kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1; done
        for f in "$WORK"/operator*.yaml; do
            kubectl delete -f "$f" --ignore-not-found --wait=false >/dev/null 2>&1
        done
        [[ -z "$CREATED_OPERATOR_NAMESPACE" ]] || kubectl delete namespace "$OPERATOR_NAMESPACE" --wait=false >/dev/null 2>&1
    fi
    [[ -z "${log_follower:-}" ]] || kill "$log_follower" 2>/dev/null
    stop "$KUBE_EMU_PID" kube-emu
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
        -p dcs-operator -p dcs-runner -p dcs-kube-emu -p dcs-doris-emu --bins
fi
BIN=$ROOT/target/debug
for b in dcs-operator dcs-runner dcs-kube-emu dcs-doris-emu; do
    [[ -x "$BIN/$b" ]] || { log "missing $BIN/$b (run without E2E_SKIP_BUILD)"; exit 2; }
done
for tool in kubectl mysql curl jq python3; do
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
    "$BIN/dcs-kube-emu" --kubeconfig "$KUBECONFIG" --kubelet --authorize --work-dir "$WORK/kube" \
        --image-map "dcs-operator=$BIN/dcs-operator" --image-map "dcs-runner=$BIN/dcs-runner" \
        >"$WORK/kube-emu.json" 2>"$WORK/kube-emu.log" &
    KUBE_EMU_PID=$!
    first_line "$WORK/kube-emu.json" 30 "$KUBE_EMU_PID" >/dev/null || { tail -n 20 "$WORK/kube-emu.log" >&2; exit 2; }
    log "kube-emu: $(head -n 1 "$WORK/kube-emu.json")"
fi
OPERATOR_IMAGE=${E2E_OPERATOR_IMAGE:-dcs-operator}
RUNNER_IMAGE=${E2E_RUNNER_IMAGE:-dcs-runner}

# ------------------------------------------------------------------------------------------ install
CHART=charts/dcs-operator
log "installing the CRD"
kubectl apply -f "$CHART/crds/dorischangelogsyncs.yaml" >/dev/null
kubectl wait --for=condition=Established --timeout=30s crd/dorischangelogsyncs.dcs.dev >/dev/null

if ! kubectl get namespace "$OPERATOR_NAMESPACE" >/dev/null 2>&1; then
    kubectl create namespace "$OPERATOR_NAMESPACE" >/dev/null
    CREATED_OPERATOR_NAMESPACE=1
fi
# On kube-emu pods share the host's network: a free port for the operator's metrics, not 8080.
METRICS_PORT=8080
if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
    METRICS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
# render_operator OUT [HELM ARGS...]: the chart rendered for this run (images, metrics port, text
# logs) plus HELM ARGS, into OUT.
render_operator() {
    local out=$1
    shift
    python3 charts/helm.py render "$CHART" --release "$RELEASE" --namespace "$OPERATOR_NAMESPACE" \
        --set "image.repository=$OPERATOR_IMAGE" --set "image.tag=$TAG" --set "metrics.port=$METRICS_PORT" \
        --set "runnerImage.repository=$RUNNER_IMAGE" --set "runnerImage.tag=$TAG" \
        --set logFormat=text --set-json 'extraEnv=[{"name":"NO_COLOR","value":"1"}]' "$@" >"$out"
}

# operator_pods_ready N: at least N operator pods, not being deleted, are Ready.
operator_pods_ready() {
    kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator -o json |
        jq -e --argjson n "${1:-1}" '[.items[] | select(.metadata.deletionTimestamp == null)
                | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length >= $n' >/dev/null
}

log "installing the operator from the rendered Helm chart"
render_operator "$WORK/operator.yaml"
kubectl apply -f "$WORK/operator.yaml" >/dev/null
if ! (wait_for "the operator pod Ready" 90 operator_pods_ready 1); then
    dump_operator
    exit 1
fi
log "operator ready ($((SECONDS - SUITE_START)) s after start)"
# The operator's identity is the chart's ServiceAccount, held to the chart's RBAC: it may read a
# Secret by name but not list Secrets cluster-wide, nor touch Nodes.
OPERATOR_SA=$(kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator \
    -o jsonpath='{.items[0].spec.serviceAccountName}')
AS="system:serviceaccount:$OPERATOR_NAMESPACE:$OPERATOR_SA"
if kubectl --as="$AS" get nodes >/dev/null 2>&1 || kubectl --as="$AS" get secrets -A >/dev/null 2>&1; then
    log "the operator's ServiceAccount $AS may list Nodes or Secrets: RBAC is not what the chart grants (is --authorize on?)"
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

echo
echo "e2e results ($((SECONDS - SUITE_START)) s in all):"
printf '  %s\n' "${results[@]}"
echo "$passed passed, $failed failed"
((failed == 0))
