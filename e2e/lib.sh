# shellcheck shell=bash
# Helpers for the e2e scenarios (sourced by run.sh). Every helper that waits polls with a timeout;
# none sleeps a fixed time to decide an outcome.

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# fail MESSAGE: ends the current scenario (each scenario runs in its own subshell).
fail() {
    log "ASSERTION FAILED: $*"
    exit 1
}

# wait_for DESCRIPTION TIMEOUT_SECONDS COMMAND...: polls COMMAND (quietly) every 0.5 s until it
# succeeds; fails the scenario with DESCRIPTION after the timeout, showing the last output.
wait_for() {
    local what=$1 timeout=$2
    shift 2
    local deadline=$((SECONDS + timeout)) out
    while true; do
        if out=$("$@" 2>&1); then
            return 0
        fi
        if ((SECONDS >= deadline)); then
            log "timed out after ${timeout}s waiting for: $what"
            log "last output of '$*':"
            printf '%s\n' "$out" | tail -n 20 >&2
            fail "$what"
        fi
        sleep 0.5
    done
}

# crds_established CRD...: every named CRD has its Established condition True. `kubectl wait
# --for=condition=Established` right after an apply fails at once ("accessor error: <nil>") while
# the API server has not yet written the CRD's status conditions; this only reads and answers.
crds_established() {
    local crd status
    for crd in "$@"; do
        status=$(kubectl get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}') || return 1
        [[ "$status" == True ]] || { echo "$crd: Established is '${status:-not set}'"; return 1; }
    done
}

# ---------------------------------------------------------------- Doris (mysql CLI against doris-emu)

# sql [DB] STATEMENT: runs one statement; tab-separated rows without headers on stdout.
# With DORIS_TLS_CA set (a scenario's own doris-emu serving TLS), over TLS verified against it.
sql() {
    mysql --protocol=TCP -h "$DORIS_HOST" -P "$DORIS_QUERY_PORT" -u "$DORIS_USER" \
        "-p$DORIS_PASSWORD" ${DORIS_TLS_CA:+--ssl "--ssl-ca=$DORIS_TLS_CA" --ssl-verify-server-cert} \
        -N -B -e "$1"
}

# create_source_table DB TABLE [PROPERTIES]: a changelog-enabled merge-on-write UNIQUE KEY table.
create_source_table() {
    local db=$1 table=$2 props=${3:-}
    sql "CREATE DATABASE IF NOT EXISTS $db"
    sql "CREATE TABLE $db.$table (
            id INT NOT NULL,
            name VARCHAR(64),
            score INT,
            note STRING
        ) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2
        PROPERTIES (\"changelog.enable\" = \"true\"${props:+, $props})"
}

# create_offsets_table DB.TABLE: the Flink connector's offset table (runner/README.md).
create_offsets_table() {
    sql "CREATE TABLE $1 (consumer_id VARCHAR(256) NOT NULL, offset_timestamp DATETIME NOT NULL,
            update_time DATETIMEV2(3) NOT NULL) UNIQUE KEY(consumer_id) DISTRIBUTED BY HASH(consumer_id) BUCKETS 1"
}

# offset_rows DB.TABLE CONSUMER: how many rows the offset table holds for CONSUMER.
offset_rows() {
    sql "SELECT COUNT(*) FROM $1 WHERE consumer_id = '$2'"
}

offset_rows_are() { [[ "$(offset_rows "$1" "$2")" == "$3" ]]; }

# insert_rows DB.TABLE FROM TO [TAG]: upserts ids FROM..TO in one statement.
insert_rows() {
    local table=$1 from=$2 to=$3 tag=${4:-v1} values="" i
    for ((i = from; i <= to; i++)); do
        values+="${values:+,}($i, 'name-$i', $((i * 7 % 101)), '$tag-$i')"
    done
    sql "INSERT INTO $table (id, name, score, note) VALUES $values"
}

# table_rows DB.TABLE: every row ordered by key.
table_rows() {
    sql "SELECT id, name, score, note FROM $1 ORDER BY id"
}

# tables_equal SOURCE SINK: succeeds when both tables hold the same rows (sink must exist).
tables_equal() {
    local a b
    a=$(table_rows "$1") || return 1
    b=$(table_rows "$2") || return 1
    if [[ "$a" != "$b" ]]; then
        echo "source $(wc -l <<<"$a") rows, sink $(wc -l <<<"$b") rows; first differences:"
        diff <(printf '%s\n' "$a") <(printf '%s\n' "$b") | head -n 10
        return 1
    fi
}

# wait_tables_equal SOURCE SINK [TIMEOUT]
wait_tables_equal() {
    wait_for "sink $2 equal to source $1" "${3:-60}" tables_equal "$1" "$2"
    log "sink $2 equals source $1 ($(table_rows "$1" | wc -l) rows)"
}

# doris_clock_advance SECONDS: moves doris-emu's clock forward through its control API.
doris_clock_advance() {
    curl -fsS -X POST "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/clock/advance" \
        -H 'Content-Type: application/json' -d "{\"seconds\":$1}"
    echo
}

# precommitted_loads DB: how many Stream Load transactions into DB are PRECOMMITTED in doris-emu.
precommitted_loads() {
    curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns" |
        jq -r --arg db "$1" '[.[] | select(.db == $db and .state == "PRECOMMITTED")] | length'
}

no_precommitted_loads() { [[ "$(precommitted_loads "$1")" == 0 ]]; }

# ---------------------------------------------------------------- Kubernetes

# new_namespace NAME: creates the namespace, labelled for Pod Security's restricted level (runner
# pods must be admitted there), and the Doris credentials Secret `doris` in it, open to every sync
# of the namespace (annotation dcs.dev/allowed-syncs: "*").
new_namespace() {
    local ns=$1
    kubectl create namespace "$ns" >/dev/null
    kubectl label namespace "$ns" pod-security.kubernetes.io/enforce=restricted >/dev/null
    kubectl -n "$ns" create secret generic doris \
        --from-literal=username="$DORIS_USER" --from-literal=password="$DORIS_PASSWORD" >/dev/null
    kubectl -n "$ns" annotate secret doris 'dcs.dev/allowed-syncs=*' >/dev/null
    E2E_NAMESPACES+=("$ns")
}

no_syncs_in() { [[ -z "$(kubectl -n "$1" get dorischangelogsyncs -o name 2>/dev/null)" ]]; }

# delete_namespace NAME: deletes its syncs first (their finalizers need the Secrets that a namespace
# deletion removes at the same time), then the namespace, and waits until it is gone.
delete_namespace() {
    local ns=$1
    kubectl -n "$ns" delete dorischangelogsyncs --all --wait=false >/dev/null 2>&1 || true
    wait_for "the syncs of namespace $ns deleted" 60 no_syncs_in "$ns"
    kubectl delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    wait_for "namespace $ns deleted" 60 bash -c "! kubectl get namespace '$ns' >/dev/null 2>&1"
}

# sync_manifest NS NAME SOURCE_TABLE SINK_TABLE [EXTRA_SPEC_YAML]: a DorisChangelogSync on stdin
# format, with short intervals so the scenarios stay quick. EXTRA is appended under spec (indented
# by two spaces by the caller).
sync_manifest() {
    local ns=$1 name=$2 source=$3 sink=$4 extra=${5:-}
    cat <<EOF
apiVersion: dcs.dev/v1alpha1
kind: DorisChangelogSync
metadata:
  name: $name
  namespace: $ns
spec:
  source:
    feNodes: ["$DORIS_HOST:$DORIS_FE_HTTP_PORT"]
    queryPort: $DORIS_QUERY_PORT
    flightSqlPort: $DORIS_FE_FLIGHT_PORT
    table: $source
    credentials:
      secretName: ${SECRET_NAME:-doris}
  startup:
    mode: initial
  changelog:
    incrementType: detail
    pollInterval: 1s
    visibleWaitTimeout: 30s
  checkpoint:
    interval: ${CHECKPOINT_INTERVAL:-1s}
  expectedSnapshotDuration: 1m
  sink:
    doris:
      feNodes: ["$DORIS_HOST:$DORIS_FE_HTTP_PORT"]
      beNodes: ["$DORIS_HOST:$DORIS_BE_HTTP_PORT"]
      table: $sink
      credentials:
        secretName: ${SECRET_NAME:-doris}
      labelPrefix: e2e
      mode: upsert
      batch:
        maxRows: 1000
        interval: 1s
  runner:
    env:
      - name: RUST_LOG
        value: info
      - name: NO_COLOR
        value: "1"
$extra
EOF
}

# jget NS NAME JSONPATH: one field of a sync.
jget() {
    kubectl -n "$1" get dorischangelogsync "$2" -o "jsonpath={$3}"
}

# condition NS NAME TYPE FIELD: a field (status, reason, message) of a condition of a sync.
condition() {
    kubectl -n "$1" get dorischangelogsync "$2" -o json |
        jq -r --arg t "$3" --arg f "$4" '.status.conditions // [] | map(select(.type == $t)) | .[0][$f] // ""'
}

phase_is() { [[ "$(jget "$1" "$2" .status.phase)" == "$3" ]]; }
condition_is() { [[ "$(condition "$1" "$2" "$3" status)" == "$4" ]]; }

# wait_phase NS NAME PHASE [TIMEOUT]
wait_phase() {
    wait_for "sync $1/$2 in phase $3" "${4:-60}" phase_is "$1" "$2" "$3"
    log "sync $1/$2 is $3"
}

# gitops_check NS NAME STATE: the sync judged by Argo CD's health check (charts/dcs-operator/health.lua)
# and kstatus, through $GITOPS_HEALTH (tests/gitops-health), is what tests/gitops-health/health_test.yaml
# expects of testdata/STATE.yaml, and shares that fixture's phase and Ready/Reconciling/Stalled, so
# the committed fixture stays what the operator writes. Waits up to 30 s for the state (an explaining
# condition may still be on its way). With E2E_WRITE_GITOPS_FIXTURES=1 it first (re)writes the
# fixture from the live object, unless a 4th argument `again` says another check writes it.
gitops_check() {
    local ns=$1 name=$2 state=$3 live="$WORK/gitops-$1-$2-$3.json"
    if [[ -n "${E2E_WRITE_GITOPS_FIXTURES:-}" && "${4:-}" != again ]]; then
        kubectl -n "$ns" get dorischangelogsync "$name" -o json >"$live"
        "$GITOPS_HEALTH" fixture "$live" "$ROOT/tests/gitops-health/testdata/$state.yaml"
        log "wrote tests/gitops-health/testdata/$state.yaml from $ns/$name"
    fi
    wait_for "$ns/$name judged as tests/gitops-health expects of testdata/$state.yaml" 30 gitops_judged "$ns" "$name" "$state"
    log "$(gitops_judged "$ns" "$name" "$state")"
}

# gitops_judged NS NAME STATE: one check of gitops_check.
gitops_judged() {
    local live="$WORK/gitops-$1-$2-$3.json"
    kubectl -n "$1" get dorischangelogsync "$2" -o json >"$live"
    (cd "$ROOT/tests/gitops-health" && "$GITOPS_HEALTH" check -script ../../charts/dcs-operator/health.lua \
        -tests health_test.yaml -input "testdata/$3.yaml" "$live")
}

# runner_pods NS SYNC: names of the sync's runner pods that are not being deleted.
runner_pods() {
    kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o json |
        jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name'
}

# runner_pod_running NS SYNC: exactly one runner pod, Running; prints its uid.
runner_pod_running() {
    kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o json |
        jq -e -r '[.items[] | select(.metadata.deletionTimestamp == null)] as $p
            | if ($p | length) == 1 and $p[0].status.phase == "Running" then $p[0].metadata.uid else error("not one running pod") end'
}

no_runner_pods() { [[ -z "$(kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o name)" ]]; }

# runner_pod_ready NS SYNC STATUS: the one runner pod's Ready condition is STATUS (True/False).
runner_pod_ready() {
    kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o json |
        jq -e --arg s "$3" '[.items[] | select(.metadata.deletionTimestamp == null)] as $p
            | ($p | length) == 1 and any($p[0].status.conditions[]?; .type == "Ready" and .status == $s)' >/dev/null
}

# pod_events NS POD REASON: the messages of the pod's events with that reason, one per line.
pod_events() {
    kubectl -n "$1" get events -o json |
        jq -r --arg pod "$2" --arg r "$3" '.items[] | select(.involvedObject.name == $pod and .reason == $r) | .message'
}

# pod_status NS POD PORT PATH: the HTTP status of GET PATH on the pod's PORT. Test bed only: pods
# share the host's network there, so the pod's address is reachable from here.
pod_status() {
    local ip
    ip=$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.podIP}')
    curl -sS -o /dev/null -w '%{http_code}' "http://$ip:$3$4"
}

# pod_metrics NS POD PORT: the pod's /metrics (on the bed from its address, elsewhere through the
# API server's pod proxy).
pod_metrics() {
    local ip
    if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
        ip=$(kubectl -n "$1" get pod "$2" -o jsonpath='{.status.podIP}')
        curl -fsS "http://$ip:$3/metrics"
    else
        kubectl get --raw "/api/v1/namespaces/$1/pods/$2:$3/proxy/metrics"
    fi
}

# runner_serves NS POD SYNC: the pod's metrics port answers with the runner of SYNC (its samples
# carry sync="SYNC"), so what the kubelet probes there is that runner and nothing else.
runner_serves() {
    pod_metrics "$1" "$2" "$RUNNER_METRICS_PORT" | grep -q "^dcs_ready{sync=\"$3\","
}

# doris_faults JSON: arms doris-emu's faults (replacing them all; '{}' disarms).
doris_faults() {
    curl -fsS -X PUT "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/faults" \
        -H 'Content-Type: application/json' -d "$1" >/dev/null
}

# table_cell COLUMN: from a `kubectl get` table on stdin (a header and one row), the cell under
# COLUMN, found by the header's character positions, so that blank cells (LAG while
# snapshotting, SHARDS of a sync without shards) do not shift the others.
table_cell() {
    awk -v want="$1" '
        NR == 1 {
            line = $0; n = 0; pos = 1
            while (match(substr(line, pos), /[^ ]+/)) {
                n++; s[n] = pos + RSTART - 1; h[n] = substr(line, s[n], RLENGTH); pos = s[n] + RLENGTH
            }
            next
        }
        NR == 2 {
            for (i = 1; i <= n; i++) if (h[i] == want) {
                e = (i < n) ? s[i + 1] : length($0) + 1
                v = substr($0, s[i], e - s[i]); gsub(/^ +| +$/, "", v); print v; exit
            }
        }'
}

# checkpoint_json NS SYNC: the runner's checkpoint (empty when none).
checkpoint_json() {
    kubectl -n "$1" get configmap "$2-checkpoint" -o json | jq -r '.data["checkpoint.json"] // ""'
}

# checkpoint_streaming NS SYNC: succeeds once the checkpoint holds a changelog position.
checkpoint_streaming() {
    checkpoint_json "$1" "$2" | grep -q .
}

# restart_count NS SYNC: restartCount of the running runner container.
restart_count() {
    kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o json |
        jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.containerStatuses[]?.restartCount] | add // 0'
}

# runner_exited_with NS SYNC CODE: succeeds once a runner container of the sync has terminated
# with exit code CODE (its current or its last state, as the kubelet reports it).
runner_exited_with() {
    kubectl -n "$1" get pods -l "dcs.dev/sync=$2" -o json |
        jq -e --argjson code "$3" '[.items[].status.containerStatuses[]?
            | (.state.terminated.exitCode, .lastState.terminated.exitCode) | select(. == $code)]
            | length > 0' >/dev/null
}

# checkpoint_stopped_with NS SYNC REASON CODE: succeeds once the runner's checkpoint records that it
# stopped with REASON and exit code CODE.
checkpoint_stopped_with() {
    checkpoint_json "$1" "$2" |
        jq -e --arg r "$3" --argjson c "$4" '.stopped.reason == $r and .stopped.exitCode == $c' >/dev/null
}

# operator_scale N: scales the operator's Deployment to N replicas and waits until N pods are
# Ready (0: until its pods are gone).
operator_scale() {
    local n=$1
    kubectl -n "$OPERATOR_NAMESPACE" scale deployment -l app.kubernetes.io/name=dcs-operator \
        --replicas="$n" >/dev/null
    if ((n == 0)); then
        wait_for "the operator's pods gone" 60 bash -c \
            "[[ -z \$(kubectl -n $OPERATOR_NAMESPACE get pods -l app.kubernetes.io/name=dcs-operator -o name) ]]"
    else
        wait_for "$n operator pod(s) Ready" 60 bash -c "(( \$(kubectl -n $OPERATOR_NAMESPACE get pods \
            -l app.kubernetes.io/name=dcs-operator -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null)
            | select(any(.status.conditions[]?; .type == \"Ready\" and .status == \"True\"))] | length') == $n ))"
    fi
}

# watch_rows DB.TABLE FILE: until killed, appends the table's row count to FILE every 0.1 s (what a
# reader of the table sees; "error" when the query failed).
watch_rows() {
    local table=$1 file=$2
    while true; do
        sql "SELECT COUNT(*) FROM $table" >>"$file" 2>/dev/null || echo error >>"$file"
        sleep 0.1
    done
}

# ---------------------------------------------------------------- diagnostics

dump_namespace() {
    local ns=$1
    echo "======== diagnostics for namespace $ns"
    echo "---- kubectl get dcs,deploy,pods,cm"
    kubectl -n "$ns" get dcs,deployments,jobs,pods,configmaps 2>&1 || true
    echo "---- syncs (yaml)"
    kubectl -n "$ns" get dorischangelogsyncs -o yaml 2>&1 || true
    echo "---- checkpoint ConfigMaps"
    kubectl -n "$ns" get configmaps -l app.kubernetes.io/managed-by=dcs-operator -o yaml 2>&1 | grep -v '^\s*$' | tail -n 80 || true
    echo "---- events"
    kubectl -n "$ns" get events -o json 2>&1 |
        jq -r '.items | sort_by(.eventTime // .lastTimestamp // .metadata.creationTimestamp) | .[]
            | "\(.eventTime // .lastTimestamp // .metadata.creationTimestamp) \(.type) \(.reason) \(.involvedObject.kind)/\(.involvedObject.name): \(.message // .note)"' 2>&1 |
        tail -n 40 || true
}

# follow_logs NS DIR: until killed, follows the logs of every pod of NS that has started into
# DIR/<pod>.<n>.log (n counts restarts of the follower: a restarted container gets a new file), so
# the logs of pods that are gone by the time a scenario fails can still be shown.
follow_logs() {
    local ns=$1 dir=$2 pod n
    local -A follower=()
    mkdir -p "$dir"
    trap 'kill $(jobs -p) 2>/dev/null; exit 0' TERM
    while true; do
        for pod in $(kubectl -n "$ns" get pods \
            -o jsonpath='{range .items[?(@.status.phase!="Pending")]}{.metadata.name}{" "}{end}' 2>/dev/null); do
            if [[ -n "${follower[$pod]:-}" ]] && kill -0 "${follower[$pod]}" 2>/dev/null; then
                continue
            fi
            n=0
            while [[ -e "$dir/$pod.$n.log" ]]; do n=$((n + 1)); done
            ((n < 10)) || continue
            kubectl -n "$ns" logs -f "$pod" --all-containers >"$dir/$pod.$n.log" 2>&1 &
            follower[$pod]=$!
        done
        sleep 0.5
    done
}

# dump_logs DIR: the last lines of every log follow_logs collected.
dump_logs() {
    local f
    for f in "$1"/*.log; do
        [[ -s "$f" ]] || continue
        echo "---- logs of pod $(basename "$f" .log) (last 60 lines)"
        tail -n 60 "$f"
    done
}

dump_doris() {
    echo "======== doris-emu: Stream Load transactions not VISIBLE"
    curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns" 2>&1 |
        jq -c '.[] | select(.state != "VISIBLE")' 2>&1 | tail -n 20 || true
    echo "======== doris-emu: clock $(curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/clock" 2>&1)"
}

dump_operator() {
    echo "======== operator ($OPERATOR_NAMESPACE)"
    kubectl -n "$OPERATOR_NAMESPACE" get deployments,pods 2>&1 || true
    local pod
    for pod in $(kubectl -n "$OPERATOR_NAMESPACE" get pods -o name 2>/dev/null); do
        echo "---- logs $pod (last 120 lines)"
        kubectl -n "$OPERATOR_NAMESPACE" logs "$pod" --tail=120 2>&1 || true
    done
}
