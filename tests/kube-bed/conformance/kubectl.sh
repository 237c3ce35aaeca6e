#!/usr/bin/env bash
# kubectl against the test bed: the commands users and GitOps tools run, checked one by one,
# on the genuine control plane with the process kubelet running the pods (logs, exit codes,
# restarts, deletion, workloads of the real controllers).
#
# Uses the server of $KUBECONFIG (which must run the process kubelet for the pod checks); when
# KUBECONFIG is unset it starts its own `dcs-kube-bed --kubelet` ($KUBE_BED_BIN, default
# target/debug/dcs-kube-bed) and stops it at the end. Prints "N passed, N failed" and exits
# non-zero when a check failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
tmp=$(mktemp -d)
emu_pid=""
cleanup() {
    if [ -n "$emu_pid" ]; then
        kill -TERM "$emu_pid" 2>/dev/null
        for _ in $(seq 1 300); do kill -0 "$emu_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$emu_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${KUBECONFIG:-}" ]; then
    bin=${KUBE_BED_BIN:-$here/../../../target/debug/dcs-kube-bed}
    "$bin" --kubelet --kubeconfig "$tmp/kubeconfig" --dir "$tmp/bed" >"$tmp/emu.out" 2>"$tmp/emu.err" &
    emu_pid=$!
    for _ in $(seq 1 3000); do [ -s "$tmp/emu.out" ] && break; kill -0 "$emu_pid" 2>/dev/null || break; sleep 0.1; done
    if [ ! -s "$tmp/emu.out" ]; then
        echo "the test bed did not start:"; tail -n 30 "$tmp/emu.err"; echo "0 passed, 1 failed"; exit 1
    fi
    export KUBECONFIG=$tmp/kubeconfig
fi

ns=kubectl-conf-$$
k() { timeout 30 kubectl --namespace "$ns" "$@"; }

# check NAME EXPECTED-SUBSTRING COMMAND...: the command succeeds and prints EXPECTED.
check() {
    local name=$1 want=$2
    shift 2
    local out
    if out=$("$@" 2>&1) && [[ "$out" == *"$want"* ]]; then
        pass=$((pass + 1)); echo "ok    $name"
    else
        fail=$((fail + 1)); echo "FAIL  $name (wanted: $want)"; printf '%s\n' "$out" | sed 's/^/      /'
    fi
}
# refuse NAME EXPECTED-SUBSTRING COMMAND...: the command fails and prints EXPECTED.
refuse() {
    local name=$1 want=$2
    shift 2
    local out
    if ! out=$("$@" 2>&1) && [[ "$out" == *"$want"* ]]; then
        pass=$((pass + 1)); echo "ok    $name"
    else
        fail=$((fail + 1)); echo "FAIL  $name (wanted failure with: $want)"; printf '%s\n' "$out" | sed 's/^/      /'
    fi
}
# eventually NAME EXPECTED COMMAND...: like check, retried for up to 20 s.
eventually() {
    local name=$1 want=$2
    shift 2
    local out=""
    for _ in $(seq 1 80); do
        if out=$("$@" 2>&1) && [[ "$out" == *"$want"* ]]; then
            pass=$((pass + 1)); echo "ok    $name"; return
        fi
        sleep 0.25
    done
    fail=$((fail + 1)); echo "FAIL  $name (wanted: $want)"; printf '%s\n' "$out" | sed 's/^/      /'
}

# gone NAME COMMAND...: the command fails with NotFound within 20 s.
gone() {
    local name=$1
    shift
    local out=""
    for _ in $(seq 1 80); do
        if ! out=$("$@" 2>&1) && [[ "$out" == *"NotFound"* ]]; then
            pass=$((pass + 1)); echo "ok    $name"; return
        fi
        sleep 0.25
    done
    fail=$((fail + 1)); echo "FAIL  $name (wanted: NotFound)"; printf '%s\n' "$out" | sed 's/^/      /'
}

check "create namespace" "created" timeout 30 kubectl create namespace "$ns"
check "create secret generic" "created" k create secret generic creds --from-literal=password=pw
check "secret data is base64" "cHc=" k get secret creds -o 'jsonpath={.data.password}'
check "create configmap" "created" k create configmap settings --from-literal=mode=fast

# CRD and custom resources, client-side and server-side apply.
check "apply CRD" "widgets.test.kube-bed.dev" k apply -f "$here/widget-crd.yaml"
# Established is set by the API server after the create returns; `kubectl wait` errors at once
# ("accessor error: <nil>") while the CRD has no conditions yet, so read the condition until it is set.
eventually "CRD established" "True" k get crd widgets.test.kube-bed.dev \
    -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}'
check "apply custom resource" "widget.test.kube-bed.dev/w1 created" k apply -f "$here/widget.yaml"
check "re-apply unchanged" "unchanged" k apply -f "$here/widget.yaml"
check "apply a change" "configured" bash -c "sed 's/size: 3/size: 5/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
check "server-side apply" "serverside-applied" bash -c "sed 's/name: w1/name: w2/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply --server-side -f -"
refuse "server-side apply conflict" "conflict" bash -c "sed -e 's/name: w1/name: w2/' -e 's/size: 3/size: 7/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply --server-side --field-manager=intruder -f -"
check "server-side apply --force-conflicts" "serverside-applied" bash -c "sed -e 's/name: w1/name: w2/' -e 's/size: 3/size: 7/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply --server-side --field-manager=intruder --force-conflicts -f -"
refuse "schema validation" "Invalid value" bash -c "sed -e 's/name: w1/name: bad/' -e 's/size: 3/size: 0/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
refuse "CEL validation rule" "only red widgets may be bigger than 10" bash -c "sed -e 's/name: w1/name: big/' -e 's/size: 3/size: 11/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
check "CEL rule satisfied" "created" bash -c "sed -e 's/name: w1/name: big/' -e 's/size: 3/size: 11\n  color: red/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
refuse "strict field validation" 'unknown field "spec.colour"' bash -c "sed -e 's/name: w1/name: typo/' -e 's/size: 3/size: 1\n  colour: red/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"

# Reading.
check "get shows printer columns" "SIZE" k get widgets
check "get row values" "w1     5" k get wd w1
check "get -o yaml has defaults" "color: blue" k get wd w1 -o yaml
check "get -o jsonpath" "7" k get wd w2 -o 'jsonpath={.spec.size}'
check "describe" "Size:" k describe wd w1
check "explain" "How big the widget is" k explain widgets.spec.size
check "label selector" "w1" k get wd -l app=demo -o name

# Status subresource and waiting.
check "patch --subresource=status" "patched" k patch wd w1 --subresource=status --type=merge -p '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}'
check "status column" "Running" k get wd w1
check "wait --for=condition" "condition met" k wait --for=condition=Ready wd/w1 --timeout=10s
check "wait --for=jsonpath" "condition met" k wait --for=jsonpath='{.status.phase}'=Running wd/w1 --timeout=10s
check "spec patch ignores status" "Running" bash -c "timeout 30 kubectl -n $ns patch wd w1 --type=merge -p '{\"spec\":{\"size\":6},\"status\":{\"phase\":\"Nope\"}}' >/dev/null && timeout 30 kubectl -n $ns get wd w1 -o jsonpath='{.status.phase}'"

# Finalizers.
check "add finalizer" "patched" k patch wd w2 --type=merge -p '{"metadata":{"finalizers":["test.kube-bed.dev/hold"]}}'
check "delete held by finalizer" "deleted" k delete wd w2 --wait=false
check "deletionTimestamp set" "T" k get wd w2 -o 'jsonpath={.metadata.deletionTimestamp}'
check "release finalizer" "patched" k patch wd w2 --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'
refuse "gone after release" "NotFound" k get wd w2

# Garbage collection of owned objects.
uid=$(k get wd w1 -o 'jsonpath={.metadata.uid}')
check "create owned ConfigMap" "created" bash -c "printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\n  ownerReferences:\n  - apiVersion: test.kube-bed.dev/v1\n    kind: Widget\n    name: w1\n    uid: $uid\ndata:\n  a: b\n' | timeout 30 kubectl -n $ns apply -f -"
check "delete owner" "deleted" k delete wd w1
gone "owned ConfigMap collected" k get cm owned
owned_by() { printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  ownerReferences:\n  - apiVersion: test.kube-bed.dev/v1\n    kind: Widget\n    name: %s\n    uid: %s\ndata:\n  a: b\n' "$1" "$2" "$3"; }
check "owner for orphaning" "created" bash -c "sed 's/name: w1/name: w3/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
uid3=$(k get wd w3 -o 'jsonpath={.metadata.uid}')
check "owned by w3" "created" bash -c "$(declare -f owned_by); owned_by orphan w3 $uid3 | timeout 30 kubectl -n $ns apply -f -"
check "delete --cascade=orphan" "deleted" k delete wd w3 --cascade=orphan
check "orphan survives without ownerReferences" "orphan" bash -c "sleep 1; timeout 30 kubectl -n $ns get cm orphan -o 'jsonpath={.metadata.name}{.metadata.ownerReferences}'"
check "owner for foreground" "created" bash -c "sed 's/name: w1/name: w4/' '$here/widget.yaml' | timeout 30 kubectl -n $ns apply -f -"
uid4=$(k get wd w4 -o 'jsonpath={.metadata.uid}')
check "owned by w4" "created" bash -c "$(declare -f owned_by); owned_by fg w4 $uid4 | timeout 30 kubectl -n $ns apply -f -"
check "delete --cascade=foreground" "deleted" k delete wd w4 --cascade=foreground --timeout=20s
refuse "foreground took the dependent first" "NotFound" k get cm fg

# A pod run by the process kubelet, and its logs.
check "create pod" "created" bash -c "printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: hello\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"echo hello from \$POD_NAME\"]\n    env:\n    - name: POD_NAME\n      valueFrom:\n        fieldRef:\n          fieldPath: metadata.name\n' | timeout 30 kubectl -n $ns apply -f -"
check "pod completes" "condition met" k wait --for=jsonpath='{.status.phase}'=Succeeded pod/hello --timeout=20s
check "logs" "hello from hello" k logs hello
check "pod in get" "Completed" k get pods
check "events table columns" "LAST SEEN" k get events
check "events table rows" "pod/hello" k get events
check "events.k8s.io table rows" "pod/hello" k get events.v1.events.k8s.io -o wide
check "create streaming pod" "created" bash -c "printf 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: ticker\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"for i in 1 2 3; do echo tick \$i; sleep 0.3; done\"]\n' | timeout 30 kubectl -n $ns apply -f -"
check "pod running" "condition met" k wait --for=condition=Ready pod/ticker --timeout=20s
check "logs -f follows to the end" "tick 3" k logs -f ticker

# A Deployment: pods, rollout status, scale, and its pods collected with it.
check "apply deployment" "created" k apply -f "$here/deployment.yaml"
check "rollout status" "successfully rolled out" k rollout status deployment/web --timeout=30s
check "scale" "scaled" k scale deployment web --replicas=2
eventually "two ready replicas" "2/2" k get deployment web
check "deployment pod logs" "serving" k logs deployment/web
check "delete deployment" "deleted" k delete deployment web
eventually "deployment pods collected" "No resources found" k get pods -l app=web

# RBAC with --authorize (only when this script started the server with it): a service account
# bound to a read-only role, impersonated with --as.
if [ -n "$emu_pid" ]; then
    check "rbac objects" "created" bash -c "printf 'apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: cm-reader\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [get, list]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: reader\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: cm-reader\nsubjects:\n- kind: ServiceAccount\n  name: reader\n  namespace: $ns\n' | timeout 30 kubectl -n $ns apply -f -"
    check "allowed by the role" "settings" k get configmaps --as="system:serviceaccount:$ns:reader" -o name
    refuse "denied outside the role" "cannot list resource \"secrets\"" k get secrets --as="system:serviceaccount:$ns:reader"
    refuse "denied verb" "cannot delete resource \"configmaps\"" k delete configmap settings --as="system:serviceaccount:$ns:reader"
fi

# Namespace deletion takes its content along.
check "delete namespace" "deleted" timeout 60 kubectl delete namespace "$ns" --timeout=30s
refuse "namespace gone" "NotFound" timeout 30 kubectl get namespace "$ns"
check "delete CRD" "deleted" timeout 30 kubectl delete crd widgets.test.kube-bed.dev

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
