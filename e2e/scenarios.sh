# shellcheck shell=bash
# The e2e scenarios (sourced by run.sh). Each is `scenario_<name> NAMESPACE`, runs in its own
# subshell with `set -euo pipefail` in a fresh namespace that holds the Secret `doris`, and uses its
# own Doris databases, so scenarios never share state (except doris-emu's clock, which only moves
# forward, and only by less than the default TTL).

# The order run.sh runs them in (and the names `e2e/run.sh NAME...` accepts).
# shellcheck disable=SC2034 # used by run.sh
SCENARIOS=(streaming ttl_blocked suspend_resume spec_change runner_killed reinit_on_expiry deletion broken_secret
    expiry_fail_then_nonce snapshot_job dead_letter sharded_snapshot sharded_reinit sharded_deletion probes adversarial
    tls schema_policy ha_namespaced)

# start_sync NS NAME DB [EXTRA_SPEC]: source table DB.src with ids 1..20, sink DB_sink.dst, the sync
# applied and Streaming with the snapshot copied.
start_sync() {
    local ns=$1 name=$2 db=$3 extra=${4:-}
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    insert_rows "$db.src" 1 20
    sync_manifest "$ns" "$name" "$db.src" "${db}_sink.dst" "$extra" | kubectl apply -f - >/dev/null
    wait_phase "$ns" "$name" Streaming 90
    wait_tables_equal "$db.src" "${db}_sink.dst"
}

# some_changes DB.TABLE FROM TO TAG: inserts FROM..TO, updates a few older rows, deletes one.
some_changes() {
    local table=$1 from=$2 to=$3 tag=$4
    insert_rows "$table" "$from" "$to" "$tag"
    sql "UPDATE $table SET score = score + 1000, note = '$tag-updated' WHERE id <= 3"
    sql "DELETE FROM $table WHERE id = $((from - 1))"
}

# 1. CRD + operator + a sync: Streaming, Ready, lag and headroom shown; sink follows every change.
scenario_streaming() {
    local ns=$1 db=e2e_streaming
    create_source_table "$db" src
    start_sync "$ns" s1 "$db"
    wait_for "condition Ready=True" 30 condition_is "$ns" s1 Ready True
    # Lag and headroom are measured on Doris's clock (the FE's TSO), not the operator's.
    wait_for "status.source.clock doris" 30 bash -c "[[ \$(kubectl -n $ns get dcs s1 -o jsonpath='{.status.source.clock}') == doris ]]"
    wait_for "status.lagSeconds and status.ttlHeadroomSeconds set" 30 \
        bash -c "[[ -n \"\$(kubectl -n $ns get dcs s1 -o jsonpath='{.status.lagSeconds}')\" && -n \"\$(kubectl -n $ns get dcs s1 -o jsonpath='{.status.ttlHeadroomSeconds}')\" ]]"

    # `kubectl get dcs`: LAG and TTL-HEADROOM columns with numbers in them.
    local table
    table=$(kubectl -n "$ns" get dcs s1)
    printf '%s\n' "$table" >&2
    [[ "$(table_cell PHASE <<<"$table")" == Streaming &&
        "$(table_cell LAG <<<"$table")" =~ ^-?[0-9]+$ &&
        "$(table_cell TTL-HEADROOM <<<"$table")" =~ ^[0-9]+$ &&
        "$(table_cell READY <<<"$table")" == True &&
        -z "$(table_cell SHARDS <<<"$table")" ]] ||
        fail "kubectl get dcs does not show PHASE Streaming, numeric LAG and TTL-HEADROOM, READY True, no SHARDS"

    # `kubectl describe dcs` tells the story: the conditions and the events of the transitions.
    local described
    described=$(kubectl -n "$ns" describe dcs s1)
    local word
    for word in Streaming Launched TtlSufficient SinkHealthy; do
        grep -q "$word" <<<"$described" || fail "kubectl describe dcs s1 does not mention $word:
$described"
    done

    # Inserts, updates, upserts of existing keys and deletes, in several statements.
    insert_rows "$db.src" 21 60 v2
    sql "UPDATE $db.src SET score = score + 1000, note = 'updated' WHERE id <= 10"
    sql "DELETE FROM $db.src WHERE id > 50"
    sql "DELETE FROM $db.src WHERE id = 15"
    insert_rows "$db.src" 5 7 v3
    sql "UPDATE $db.src SET name = NULL WHERE id = 30"
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_for "condition SinkHealthy=True" 30 condition_is "$ns" s1 SinkHealthy True
    # The kubelet probes the runner (build.rs): it is Ready once it reads, and never restarted.
    wait_for "the runner pod Ready (its readiness probe on /readyz)" 60 runner_pod_ready "$ns" s1 True
    runner_serves "$ns" "$(runner_pods "$ns" s1)" s1 || fail "the runner pod's metrics port is not served by the runner of s1"
    [[ "$(restart_count "$ns" s1)" == 0 ]] || fail "the runner container restarted: $(kubectl -n "$ns" get pods -o wide)"
    # As README ("GitOps") says: kubectl wait on Ready, Argo CD's health check Healthy, kstatus Current.
    kubectl -n "$ns" wait --for=condition=Ready dorischangelogsync/s1 --timeout=30s >/dev/null ||
        fail "kubectl wait --for=condition=Ready dorischangelogsync/s1 did not return"
    gitops_check "$ns" s1 streaming
}

# 2. A TTL shorter than the sync needs: Blocked, TtlSufficient False with the numbers, no runner.
scenario_ttl_blocked() {
    local ns=$1 db=e2e_ttl
    create_source_table "$db" src '"changelog.ttl_seconds" = "60"'
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    sync_manifest "$ns" s2 "$db.src" "${db}_sink.dst" | kubectl apply -f - >/dev/null
    wait_phase "$ns" s2 Blocked 60
    wait_for "condition TtlSufficient=False" 30 condition_is "$ns" s2 TtlSufficient False
    local message reason
    message=$(condition "$ns" s2 TtlSufficient message)
    reason=$(condition "$ns" s2 TtlSufficient reason)
    log "TtlSufficient $reason: $message"
    [[ "$reason" == TtlTooShort ]] || fail "TtlSufficient reason is '$reason', expected TtlTooShort"
    # The table's TTL (60 s) and the required TTL, which covers expectedSnapshotDuration (1m).
    [[ "$message" =~ ttl_seconds\ is\ 60s ]] || fail "message does not give the table's TTL of 60s: $message"
    [[ "$message" =~ at\ least\ ([0-9]+)s ]] || fail "message does not give the required TTL: $message"
    ((BASH_REMATCH[1] >= 60 + 1 + 1)) || fail "required TTL ${BASH_REMATCH[1]}s does not cover 1m + 1s + 1s"
    [[ "$message" == *ALTER\ TABLE* ]] || fail "message does not tell the fix (ALTER TABLE ...): $message"
    condition_is "$ns" s2 Ready False || fail "Ready is not False while Blocked"
    [[ -z "$(kubectl -n "$ns" get deployments,jobs -o name)" ]] || fail "a runner workload exists while Blocked"
    no_runner_pods "$ns" s2 || fail "a runner pod exists while Blocked"
    wait_for "a Warning event about the TTL" 30 \
        bash -c "kubectl -n $ns get events -o json | jq -e '[.items[] | select(.type == \"Warning\")] | length > 0' >/dev/null"
    # Argo CD Degraded, kstatus Failed (the Stalled condition).
    gitops_check "$ns" s2 blocked

    # Fixing the table and touching the spec (a new generation is probed again) lets it run.
    sql "ALTER TABLE $db.src SET (\"changelog.ttl_seconds\" = \"3600\")"
    kubectl -n "$ns" patch dcs s2 --type merge -p '{"spec":{"changelog":{"pollInterval":"2s"}}}' >/dev/null
    wait_phase "$ns" s2 Streaming 60
    wait_for "condition TtlSufficient=True" 30 condition_is "$ns" s2 TtlSufficient True
    # Stalled went with the block: healthy again for Argo CD and kstatus.
    gitops_check "$ns" s2 streaming again
}

# 4. suspend: true removes the runner and keeps the checkpoint; false resumes from it, nothing lost.
scenario_suspend_resume() {
    local ns=$1 db=e2e_suspend
    create_source_table "$db" src
    start_sync "$ns" s4 "$db"
    local consumer
    consumer=$(jget "$ns" s4 .status.consumerId)
    [[ -n "$consumer" ]] || fail "status.consumerId is empty"
    wait_for "a checkpoint in the checkpoint ConfigMap" 30 checkpoint_streaming "$ns" s4

    kubectl -n "$ns" patch dcs s4 --type merge -p '{"spec":{"suspend":true}}' >/dev/null
    wait_phase "$ns" s4 Suspended 60
    wait_for "runner workload removed" 60 bash -c "[[ -z \"\$(kubectl -n $ns get deployments,jobs -o name)\" ]]"
    wait_for "runner pods gone" 60 no_runner_pods "$ns" s4
    checkpoint_streaming "$ns" s4 || fail "the checkpoint was not kept while suspended"
    gitops_check "$ns" s4 suspended

    # Changes while suspended stay out of the sink until the sync resumes.
    some_changes "$db.src" 21 40 suspended
    ! tables_equal "$db.src" "${db}_sink.dst" >/dev/null || fail "the sink changed while the sync was suspended"

    kubectl -n "$ns" patch dcs s4 --type merge -p '{"spec":{"suspend":false}}' >/dev/null
    wait_for "one runner pod running again" 60 runner_pod_running "$ns" s4
    wait_phase "$ns" s4 Streaming 60
    wait_tables_equal "$db.src" "${db}_sink.dst"
    [[ "$(jget "$ns" s4 .status.consumerId)" == "$consumer" ]] ||
        fail "consumer id changed from $consumer to $(jget "$ns" s4 .status.consumerId): resumed with a re-initialisation, not from the checkpoint"
    [[ -z "$(jget "$ns" s4 .status.lastReinit)" ]] || fail "status.lastReinit set after a plain resume"
    some_changes "$db.src" 41 50 resumed
    wait_tables_equal "$db.src" "${db}_sink.dst"
}

# 5. A spec change (batch size, poll interval) rolls the runner; nothing is lost.
scenario_spec_change() {
    local ns=$1 db=e2e_spec
    create_source_table "$db" src
    start_sync "$ns" s5 "$db"
    local old_pod old_hash consumer
    old_pod=$(runner_pod_running "$ns" s5) || fail "no running runner pod"
    old_hash=$(kubectl -n "$ns" get deployment s5-runner -o jsonpath='{.spec.template.metadata.annotations.dcs\.dev/config-hash}')
    consumer=$(jget "$ns" s5 .status.consumerId)

    some_changes "$db.src" 21 30 before-roll
    kubectl -n "$ns" patch dcs s5 --type merge \
        -p '{"spec":{"changelog":{"pollInterval":"2s"},"sink":{"doris":{"batch":{"maxRows":7}}}}}' >/dev/null
    some_changes "$db.src" 31 40 during-roll
    wait_for "the runner Deployment's config hash changed" 60 \
        bash -c "h=\$(kubectl -n $ns get deployment s5-runner -o jsonpath='{.spec.template.metadata.annotations.dcs\\.dev/config-hash}'); [[ -n \"\$h\" && \"\$h\" != '$old_hash' ]]"
    wait_for "a new runner pod running" 60 \
        bash -c "uid=\$(kubectl -n $ns get pods -l dcs.dev/sync=s5 -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == \"Running\")] | if length == 1 then .[0].metadata.uid else \"\" end'); [[ -n \"\$uid\" && \"\$uid\" != '$old_pod' ]]"
    kubectl -n "$ns" get configmap s5-runner-config -o jsonpath='{.data.sync\.yaml}' | grep -q 'maxRows: 7' ||
        fail "the runner config does not carry the new batch size"
    some_changes "$db.src" 41 60 after-roll
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_phase "$ns" s5 Streaming 30
    [[ "$(jget "$ns" s5 .status.consumerId)" == "$consumer" ]] || fail "the consumer id changed on a spec change"
}

# runner_pid NS: the pid of the dcs-runner process of the pod in NS (the test bed's process kubelet).
runner_pid() {
    local ns=$1 p
    for p in /proc/[0-9]*; do
        [[ "$(cat "$p/comm" 2>/dev/null)" == dcs-runner ]] || continue
        if tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "POD_NAMESPACE=$ns"; then
            echo "${p#/proc/}"
            return 0
        fi
    done
    return 1
}

# 6. The runner pod deleted, then its process killed with SIGKILL: recovered, nothing lost.
scenario_runner_killed() {
    local ns=$1 db=e2e_killed
    create_source_table "$db" src
    start_sync "$ns" s6 "$db"
    local pod uid
    pod=$(runner_pods "$ns" s6)
    uid=$(runner_pod_running "$ns" s6)

    some_changes "$db.src" 21 30 before-delete
    log "kubectl delete pod $pod"
    kubectl -n "$ns" delete pod "$pod" --wait=false >/dev/null
    some_changes "$db.src" 31 40 during-delete
    wait_for "a replacement runner pod running" 60 \
        bash -c "u=\$(kubectl -n $ns get pods -l dcs.dev/sync=s6 -o json | jq -r '[.items[] | select(.metadata.deletionTimestamp == null and .status.phase == \"Running\")] | if length == 1 then .[0].metadata.uid else \"\" end'); [[ -n \"\$u\" && \"\$u\" != '$uid' ]]"
    wait_tables_equal "$db.src" "${db}_sink.dst"

    some_changes "$db.src" 41 50 before-kill
    if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
        local pid restarts
        wait_for "the runner process" 30 runner_pid "$ns"
        pid=$(runner_pid "$ns")
        restarts=$(restart_count "$ns" s6)
        log "kill -KILL $pid (the dcs-runner process of $ns)"
        kill -KILL "$pid"
        some_changes "$db.src" 51 60 during-kill
        wait_for "the runner container restarted" 60 \
            bash -c "(( \$(kubectl -n $ns get pods -l dcs.dev/sync=s6 -o json | jq '[.items[].status.containerStatuses[]?.restartCount] | add // 0') > $restarts ))"
        # The restart is counted in status.runnerRestarts and in `kubectl get dcs -o wide`.
        wait_for "status.runnerRestarts above $restarts" 60 \
            bash -c "r=\$(kubectl -n $ns get dcs s6 -o jsonpath='{.status.runnerRestarts}'); (( \${r:-0} > $restarts ))"
        [[ "$(kubectl -n "$ns" get dcs s6 -o wide | table_cell RESTARTS)" =~ ^[1-9][0-9]*$ ]] ||
            fail "kubectl get dcs -o wide shows no RESTARTS count: $(kubectl -n "$ns" get dcs s6 -o wide)"
    else
        # No access to the node's processes: a forced deletion kills the container without grace.
        pod=$(runner_pods "$ns" s6)
        log "kubectl delete pod $pod --grace-period=0 --force"
        kubectl -n "$ns" delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1
        some_changes "$db.src" 51 60 during-kill
    fi
    wait_for "one runner pod running" 60 runner_pod_running "$ns" s6
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_phase "$ns" s6 Streaming 30
    # The restarted runner settles the killed one's pre-committed loads (commit or abort).
    wait_for "no pre-committed loads left in ${db}_sink" 30 no_precommitted_loads "${db}_sink"
}

# 3. doris-emu's clock moves past the TTL behind a live runner's offset: the runner stops with
# OffsetExpired (exit 3) instead of reading on, the operator re-initialises under `<base>-r<n>`,
# and the sink equals the source again (also for rows deleted in the lost window) without ever
# being empty.
scenario_reinit_on_expiry() {
    local ns=$1 db=e2e_reinit
    create_source_table "$db" src '"changelog.ttl_seconds" = "600"'
    create_offsets_table "$db.offsets"
    start_sync "$ns" s3 "$db" "  offsets:
    table: $db.offsets
    consumerId: s3-consumer"
    local base
    base=$(jget "$ns" s3 .status.consumerId)
    [[ "$base" == s3-consumer ]] || fail "status.consumerId is '$base', not offsets.consumerId s3-consumer"
    wait_for "a checkpoint in the checkpoint ConfigMap" 30 checkpoint_streaming "$ns" s3
    wait_for "the offset-table row of $base" 30 offset_rows_are "$db.offsets" "$base" 1

    # The runner keeps running: change the source, then let the changelog expire behind its offset
    # before its next window. The operator is paused meanwhile, so that only the runner can notice
    # (a live operator probing Doris's clock first would re-initialise on the headroom instead):
    # its own guard must stop it with OffsetExpired, exit code 3, and record why in its checkpoint.
    operator_scale 0
    # Whatever happens next, the operator comes back (the scenario runs in a subshell of its own;
    # the trap sees only globals once the function has returned).
    REINIT_WATCHER=""
    trap 'kill ${REINIT_WATCHER:-} 2>/dev/null || true; operator_scale 1' EXIT
    some_changes "$db.src" 21 30 lost-window
    sql "DELETE FROM $db.src WHERE id IN (5, 6)"
    log "advancing doris-emu's clock by 700 s (TTL 600 s) under the live runner: $(doris_clock_advance 700)"
    wait_for "the runner exited with code 3" 60 runner_exited_with "$ns" s3 3
    wait_for "the checkpoint records the stop (OffsetExpired, exit code 3)" 30 \
        checkpoint_stopped_with "$ns" s3 OffsetExpired 3
    log "the runner stopped: $(checkpoint_json "$ns" s3 | jq -c .stopped)"
    [[ "$(jget "$ns" s3 .status.consumerId)" == "$base" ]] || fail "the consumer changed while the operator was paused"

    # A reader polls the sink from now on, through the reinit and the rebuild's swap.
    local counts=$WORK/reinit-sink-counts old_rows
    old_rows=$(sql "SELECT COUNT(*) FROM ${db}_sink.dst")
    : >"$counts"
    watch_rows "${db}_sink.dst" "$counts" &
    REINIT_WATCHER=$!
    # The operator's first reconcile after its restart acts on the runner's word.
    operator_scale 1
    wait_for "status.consumerId is $base-r<n>" 120 \
        bash -c "[[ \"\$(kubectl -n $ns get dcs s3 -o jsonpath='{.status.consumerId}')\" =~ ^$base-r[0-9]+\$ ]]"
    local consumer
    consumer=$(jget "$ns" s3 .status.consumerId)
    log "re-initialised: consumer $base -> $consumer; lastReinit $(jget "$ns" s3 .status.lastReinit)"
    [[ "$(jget "$ns" s3 .status.lastReinit.previousConsumerId)" == "$base" ]] ||
        fail "status.lastReinit.previousConsumerId is not $base"
    [[ "$(jget "$ns" s3 .status.lastReinit.reason)" == OffsetExpired ]] ||
        fail "lastReinit.reason is '$(jget "$ns" s3 .status.lastReinit.reason)', expected OffsetExpired"
    wait_for "a Reinitialized event" 30 \
        bash -c "kubectl -n $ns get events -o json | jq -e '[.items[] | select(.reason == \"Reinitialized\")] | length > 0' >/dev/null"
    local event
    event=$(kubectl -n "$ns" get events -o json | jq -r '[.items[] | select(.reason == "Reinitialized")][0] | .message // .note')
    log "Reinitialized event: $event"
    [[ "$event" == "the runner reports the offset expired: "* ]] ||
        fail "the Reinitialized event does not give the runner's word: $event"
    wait_phase "$ns" s3 Streaming 90
    wait_tables_equal "$db.src" "${db}_sink.dst" 60
    kill "$REINIT_WATCHER" 2>/dev/null || true
    wait "$REINIT_WATCHER" 2>/dev/null || true
    # Readers saw the old table until the rebuilt one was swapped in, then the whole rebuild (the
    # source's rows, nothing changed it meanwhile): never empty, never part of either.
    local new_rows seen
    new_rows=$(sql "SELECT COUNT(*) FROM $db.src")
    seen=$(sort "$counts" | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
    log "a reader of the sink saw (rows x reads): $seen; old table $old_rows rows, rebuilt $new_rows"
    grep -qvx -e "$old_rows" -e "$new_rows" "$counts" &&
        fail "a reader saw the sink neither as the old table ($old_rows rows) nor as the rebuilt one ($new_rows rows): $seen"
    grep -qx "$new_rows" "$counts" || fail "the reader never saw the rebuilt table: $seen"
    [[ -z "$(sql "SHOW TABLES FROM ${db}_sink LIKE 'dst__dcs_shadow'")" ]] || fail "the shadow table is still there after the swap"
    some_changes "$db.src" 31 40 after-reinit
    wait_tables_equal "$db.src" "${db}_sink.dst"
    [[ "$(jget "$ns" s3 .status.consumerId)" == "$consumer" ]] || fail "re-initialised more than once"
    # The new consumer records its progress; the expired consumer's row is gone.
    wait_for "the offset-table row of $consumer" 30 offset_rows_are "$db.offsets" "$consumer" 1
    [[ "$(offset_rows "$db.offsets" "$base")" == 0 ]] || fail "the offset-table row of the expired consumer $base is still there"
}

# 7. Deletion: the finalizer runs (the consumer's offset-table row is removed from Doris), the sync
# and every object it owns go, and no load of it stays pre-committed.
scenario_deletion() {
    local ns=$1 db=e2e_delete
    create_source_table "$db" src
    create_offsets_table "$db.offsets"
    # A long checkpoint interval: loads of changes read after the snapshot stay pre-committed
    # until the next checkpoint, so the deletion meets the runner with a transaction open.
    CHECKPOINT_INTERVAL=60s start_sync "$ns" s7 "$db" "  offsets:
    table: $db.offsets
    consumerId: s7-consumer"
    kubectl -n "$ns" get dcs s7 -o jsonpath='{.metadata.finalizers}' | grep -q 'dcs.dev/cleanup' ||
        fail "the sync has no dcs.dev/cleanup finalizer: $(kubectl -n "$ns" get dcs s7 -o jsonpath='{.metadata.finalizers}')"
    [[ "$(jget "$ns" s7 .status.consumerId)" == s7-consumer ]] || fail "status.consumerId is not offsets.consumerId"
    wait_for "the runner's offset-table row" 30 offset_rows_are "$db.offsets" "s7-consumer" 1
    local owned=(deployment/s7-runner configmap/s7-runner-config configmap/s7-checkpoint
        serviceaccount/s7-runner role.rbac.authorization.k8s.io/s7-runner rolebinding.rbac.authorization.k8s.io/s7-runner)
    kubectl -n "$ns" get "${owned[@]}" -o name >/dev/null || fail "a runner object is missing before deletion"

    insert_rows "$db.src" 21 30 in-flight
    wait_for "a pre-committed load of the runner" 30 bash -c "(( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns |
        jq '[.[] | select(.db == \"${db}_sink\" and .state == \"PRECOMMITTED\")] | length') > 0 ))"
    kubectl -n "$ns" delete dcs s7 --wait=false >/dev/null
    wait_for "the sync is gone (finalizer released)" 60 bash -c "! kubectl -n $ns get dcs s7 >/dev/null 2>&1"
    local o
    for o in "${owned[@]}"; do
        wait_for "$o garbage-collected" 60 bash -c "! kubectl -n $ns get $o >/dev/null 2>&1"
    done
    wait_for "runner pods gone" 60 no_runner_pods "$ns" s7
    local rows open
    rows=$(offset_rows "$db.offsets" s7-consumer)
    [[ "$rows" == 0 ]] || fail "the offset-table row of consumer s7-consumer is still there after deletion ($rows rows)"
    open=$(precommitted_loads "${db}_sink")
    [[ "$open" == 0 ]] || fail "$open Stream Load transactions of the deleted sync are still PRECOMMITTED: $(
        curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns" | jq -c '[.[] | select(.state == "PRECOMMITTED")]')"
}

# 8. A Secret reference that does not resolve: Blocked, with a message naming the Secret (and the key).
scenario_broken_secret() {
    local ns=$1 db=e2e_secret
    create_source_table "$db" src
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    SECRET_NAME=no-such-secret sync_manifest "$ns" s8 "$db.src" "${db}_sink.dst" | kubectl apply -f - >/dev/null
    wait_phase "$ns" s8 Blocked 60
    local message
    message=$(condition "$ns" s8 Ready message)
    log "Ready $(condition "$ns" s8 Ready reason): $message"
    condition_is "$ns" s8 Ready False || fail "Ready is not False"
    [[ "$message" == *no-such-secret* ]] || fail "the Ready message does not name the Secret no-such-secret: $message"
    [[ -z "$(kubectl -n "$ns" get deployments,jobs -o name)" ]] || fail "a runner workload exists for a sync without credentials"

    # A Secret that exists but lacks the password key: the message names the key.
    kubectl -n "$ns" create secret generic half --from-literal=username="$DORIS_USER" >/dev/null
    kubectl -n "$ns" annotate secret half dcs.dev/allowed-syncs=s8b >/dev/null
    SECRET_NAME=half sync_manifest "$ns" s8b "$db.src" "${db}_sink.dst" | kubectl apply -f - >/dev/null
    wait_phase "$ns" s8b Blocked 60
    message=$(condition "$ns" s8b Ready message)
    log "Ready $(condition "$ns" s8b Ready reason): $message"
    [[ "$message" == *half* && "$message" == *password* ]] ||
        fail "the Ready message does not name the Secret half and its missing key password: $message"

    # A complete Secret that does not allow the sync (it names another one): Blocked with the
    # annotation to add, no runner, and the credentials never sent to the feNodes the sync names.
    kubectl -n "$ns" create secret generic other-team \
        --from-literal=username="$DORIS_USER" --from-literal=password="$DORIS_PASSWORD" >/dev/null
    kubectl -n "$ns" annotate secret other-team dcs.dev/allowed-syncs=someone-else >/dev/null
    SECRET_NAME=other-team sync_manifest "$ns" s8c "$db.src" "${db}_sink.dst" | kubectl apply -f - >/dev/null
    wait_phase "$ns" s8c Blocked 60
    message=$(condition "$ns" s8c Ready message)
    log "Ready $(condition "$ns" s8c Ready reason): $message"
    [[ "$(condition "$ns" s8c Ready reason)" == CredentialsNotAllowed ]] ||
        fail "Ready reason is not CredentialsNotAllowed: $(condition "$ns" s8c Ready reason)"
    [[ "$message" == *"annotate secret other-team dcs.dev/allowed-syncs=s8c"* ]] ||
        fail "the Ready message does not say which annotation to add: $message"
    no_runner_pods "$ns" s8c || fail "a runner pod exists for a sync whose Secret does not allow it"
    # Once the Secret names the sync, it streams (a spec change makes the operator look again).
    kubectl -n "$ns" annotate --overwrite secret other-team dcs.dev/allowed-syncs=someone-else,s8c >/dev/null
    kubectl -n "$ns" patch dcs s8c --type merge -p '{"spec":{"changelog":{"pollInterval":"2s"}}}' >/dev/null
    wait_phase "$ns" s8c Streaming 60
    # Taking the permission back stops it at the next reconcile: Blocked again, and its runner
    # pod, which refers to the Secret, goes.
    kubectl -n "$ns" annotate --overwrite secret other-team dcs.dev/allowed-syncs=someone-else >/dev/null
    wait_phase "$ns" s8c Blocked 90
    [[ "$(condition "$ns" s8c Ready reason)" == CredentialsNotAllowed ]] ||
        fail "Ready reason after the revocation is not CredentialsNotAllowed: $(condition "$ns" s8c Ready reason)"
    wait_for "the runner pod of s8c gone after the revocation" 60 no_runner_pods "$ns" s8c
}

# 9. onOffsetExpired: fail → phase Failed and nothing touched; a new reinitNonce then starts again
# under a new consumer id, and the sink equals the source.
scenario_expiry_fail_then_nonce() {
    local ns=$1 db=e2e_fail
    create_source_table "$db" src '"changelog.ttl_seconds" = "600"'
    start_sync "$ns" s9 "$db" "  onOffsetExpired: fail"
    local base
    base=$(jget "$ns" s9 .status.consumerId)
    wait_for "a checkpoint in the checkpoint ConfigMap" 30 checkpoint_streaming "$ns" s9

    kubectl -n "$ns" patch dcs s9 --type merge -p '{"spec":{"suspend":true}}' >/dev/null
    wait_phase "$ns" s9 Suspended 60
    wait_for "runner pods gone" 60 no_runner_pods "$ns" s9
    some_changes "$db.src" 21 30 lost-window
    log "advancing doris-emu's clock by 700 s (TTL 600 s): $(doris_clock_advance 700)"
    kubectl -n "$ns" patch dcs s9 --type merge -p '{"spec":{"suspend":false}}' >/dev/null
    wait_phase "$ns" s9 Failed 60
    log "Ready $(condition "$ns" s9 Ready reason): $(condition "$ns" s9 Ready message)"
    condition_is "$ns" s9 Ready False || fail "Ready is not False in phase Failed"
    [[ "$(condition "$ns" s9 OffsetHealthy reason)" == OffsetExpired ]] ||
        fail "OffsetHealthy reason is '$(condition "$ns" s9 OffsetHealthy reason)', expected OffsetExpired"
    [[ "$(jget "$ns" s9 .status.consumerId)" == "$base" ]] || fail "the consumer id changed although onOffsetExpired is fail"
    [[ -z "$(kubectl -n "$ns" get deployments,jobs -o name)" ]] || fail "a runner workload exists in phase Failed"
    checkpoint_streaming "$ns" s9 || fail "the checkpoint was touched in phase Failed"
    gitops_check "$ns" s9 failed

    kubectl -n "$ns" patch dcs s9 --type merge -p '{"spec":{"reinitNonce":"again-1"}}' >/dev/null
    wait_for "status.consumerId is $base-r<n>" 60 \
        bash -c "[[ \"\$(kubectl -n $ns get dcs s9 -o jsonpath='{.status.consumerId}')\" =~ ^$base-r[0-9]+\$ ]]"
    [[ "$(jget "$ns" s9 .status.lastReinit.reason)" == NonceChanged ]] ||
        fail "lastReinit.reason is '$(jget "$ns" s9 .status.lastReinit.reason)', expected NonceChanged"
    wait_phase "$ns" s9 Streaming 90
    wait_tables_equal "$db.src" "${db}_sink.dst" 60
    gitops_check "$ns" s9 streaming again
}

# 10. startup.mode snapshot: a bounded Job (no Deployment) copies the table once, also from a table
# without a changelog; SnapshotComplete True.
scenario_snapshot_job() {
    local ns=$1 db=e2e_snapshot
    sql "CREATE DATABASE IF NOT EXISTS $db"
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    sql "CREATE TABLE $db.src (id INT NOT NULL, name VARCHAR(64), score INT, note STRING)
        UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3"
    insert_rows "$db.src" 1 120 once
    sync_manifest "$ns" s10 "$db.src" "${db}_sink.dst" | sed 's/mode: initial/mode: snapshot/' |
        kubectl apply -f - >/dev/null
    wait_for "the runner Job" 60 kubectl -n "$ns" get job s10-runner
    [[ -z "$(kubectl -n "$ns" get deployments -o name)" ]] || fail "a Deployment exists for a snapshot-mode sync"
    wait_for "the Job succeeded" 90 \
        bash -c "(( \$(kubectl -n $ns get job s10-runner -o jsonpath='{.status.succeeded}' 2>/dev/null || echo 0) >= 1 ))"
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_for "condition SnapshotComplete=True" 60 condition_is "$ns" s10 SnapshotComplete True
    wait_for "status.snapshot.rowsRead 120 and completedAt set" 20 \
        bash -c "[[ \$(kubectl -n $ns get dcs s10 -o jsonpath='{.status.snapshot.rowsRead}') == 120 &&
            -n \$(kubectl -n $ns get dcs s10 -o jsonpath='{.status.snapshot.completedAt}') ]]"
    log "phase $(jget "$ns" s10 .status.phase), snapshot $(jget "$ns" s10 .status.snapshot)"
    # Done: Argo CD Healthy, kstatus Current, though the phase stays Snapshotting.
    gitops_check "$ns" s10 snapshot-done
}

# A dead-letter table (spec.sink.doris.deadLetter; docs/ARCHITECTURE.md §3.6): the sink's name is
# NOT NULL, so Doris refuses the source rows without one, in the snapshot and in the changelog.
# They land in the dead-letter table with Doris's reason, the others in the sink; the sync stays
# Streaming and Ready; status.sink.rowsRejected and the runner's dcs_rows_rejected_total count them.
scenario_dead_letter() {
    local ns=$1 db=e2e_dead name=s17
    create_source_table "$db" src
    insert_rows "$db.src" 1 20 v1
    sql "UPDATE $db.src SET name = NULL WHERE id = 3 OR id = 7"
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    sql "CREATE TABLE ${db}_sink.dst (id INT NOT NULL, name VARCHAR(192) NOT NULL, score INT, note STRING)
        UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1"
    sync_manifest "$ns" $name "$db.src" "${db}_sink.dst" |
        sed "s/^      mode: upsert$/      mode: upsert\n      deadLetter: {table: ${db}_sink.rejected}/" |
        kubectl apply -f - >/dev/null
    wait_phase "$ns" $name Streaming 90
    wait_for "the two refused snapshot rows in the dead-letter table" 60 dead_letters_are "$db" 2
    sql "INSERT INTO $db.src (id, name, score, note) VALUES (21, NULL, 1, 'late'), (22, 'name-22', 2, 'late')"
    wait_for "the refused change in the dead-letter table" 60 dead_letters_are "$db" 3
    wait_for "the sink equal to the source's rows with a name" 60 accepted_rows_in_sink "$db"
    wait_for "status.sink.rowsRejected 3" 60 bash -c \
        "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.sink.rowsRejected}') == 3 ]]"
    wait_for "condition Ready=True" 30 condition_is "$ns" $name Ready True
    local runner
    runner=$(runner_pods "$ns" $name)
    wait_for "dcs_rows_rejected_total 3 on the runner's /metrics" 30 bash -c \
        "$(declare -f pod_metrics); pod_metrics $ns $runner $RUNNER_METRICS_PORT | grep -qx 'dcs_rows_rejected_total{sync=\"$name\",consumer=\"$name\"} 3'"
    [[ "$(restart_count "$ns" $name)" == 0 ]] || fail "the runner container restarted"
    log "dead-letter table: $(sql "SELECT op, reason, row_json FROM ${db}_sink.rejected ORDER BY tso")"
}

# dead_letters_are DB N: DB_sink.rejected holds N rows, each refused for the NULL name.
dead_letters_are() {
    [[ "$(sql "SELECT COUNT(*) FROM ${1}_sink.rejected")" == "$2" &&
        "$(sql "SELECT COUNT(*) FROM ${1}_sink.rejected WHERE reason = 'column(name) values is null while columns is not nullable' AND source_table = '$1.src'")" == "$2" ]]
}

# accepted_rows_in_sink DB: the sink holds exactly the source rows that have a name.
accepted_rows_in_sink() {
    [[ "$(sql "SELECT id, name, score, note FROM $1.src WHERE name IS NOT NULL ORDER BY id")" == "$(table_rows "${1}_sink.dst")" ]]
}

# sharded_source DB: DB.src, 4,000 rows in 8 buckets (so 8 tablets for four shards), and DB_sink.
sharded_source() {
    local db=$1 from
    sql "CREATE DATABASE IF NOT EXISTS $db"
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    sql "CREATE TABLE $db.src (id INT NOT NULL, name VARCHAR(64), score INT, note STRING)
        UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 8 PROPERTIES (\"changelog.enable\" = \"true\")"
    for ((from = 1; from <= 4000; from += 500)); do
        insert_rows "$db.src" "$from" $((from + 499)) before
    done
}

# apply_sharded NS NAME DB: the sync of DB.src into DB_sink.dst read by four shards, in loads of
# 40 rows (with doris-emu's answers slowed, each shard then spans many loads).
apply_sharded() {
    sync_manifest "$1" "$2" "$3.src" "${3}_sink.dst" "  snapshot:
    parallelism: 4" | sed 's/maxRows: 1000/maxRows: 40/' | kubectl apply -f - >/dev/null
}

# 14. A snapshot read by four shards (spec.snapshot.parallelism: 4; docs/ARCHITECTURE.md §3.13,
# docs/ARCHITECTURE.md §4.8): the operator records T0 and runs an Indexed Job of four shard
# pods; shard pods deleted (one gracefully, one forced) and the operator pod deleted
# mid-snapshot: the shards restart alone while the source changes, T0 stays the recorded one; the
# status shows every shard and `kubectl get dcs` the whole (SHARDS 4/4); the changelog Deployment then
# reads from T0, and the sink equals the source, the changes made during the snapshot included.
scenario_sharded_snapshot() {
    local ns=$1 db=e2e_shards name=s14
    sharded_source "$db"
    # Slow answers and small loads stretch each shard over many loads, so the deletions below land
    # inside the snapshot.
    doris_faults '{"http_delay_ms": 100}'
    apply_sharded "$ns" $name "$db"
    wait_for "the shards' Indexed Job" 60 \
        bash -c "[[ \$(kubectl -n $ns get job $name-runner -o jsonpath='{.spec.completionMode}/{.spec.completions}/{.spec.parallelism}' 2>/dev/null) == Indexed/4/4 ]]"
    [[ -z "$(kubectl -n "$ns" get deployments -o name)" ]] || fail "a Deployment exists while the shards read"
    local t0
    t0=$(kubectl -n "$ns" get configmap $name-runner-config -o json | jq -r '.data["sync.yaml"]' |
        awk '/dcs.dev\/snapshot-t0/ { gsub(/[^0-9]/, "", $2); print $2 }')
    [[ "$t0" =~ ^[0-9]+$ ]] || fail "no T0 in the runners' manifest"
    log "T0 $t0"
    wait_for "four shard pods running" 60 \
        bash -c "(( \$(kubectl -n $ns get pods -l dcs.dev/sync=$name -o json | jq '[.items[] | select(.status.phase == \"Running\")] | length') == 4 ))"
    wait_for "a shard snapshotting" 60 \
        bash -c "kubectl -n $ns get dcs $name -o json | jq -e '[.status.snapshot.shards[]? | select(.phase == \"Snapshotting\")] | length > 0' >/dev/null"
    # Mid-snapshot: Argo CD Progressing, kstatus InProgress (the Reconciling condition).
    gitops_check "$ns" $name snapshotting
    some_changes "$db.src" 4001 4010 during-snapshot
    local index pod
    for index in 1 2; do
        pod=$(kubectl -n "$ns" get pods -l "dcs.dev/sync=$name" -o json | jq -r --arg i "$index" \
            '[.items[] | select(.metadata.deletionTimestamp == null and .metadata.annotations["batch.kubernetes.io/job-completion-index"] == $i and .status.phase == "Running")][0].metadata.name // ""')
        [[ -n "$pod" ]] || fail "no running pod of shard $index"
        [[ "$(jget "$ns" $name ".status.snapshot.shards[$index].phase")" != Done ]] ||
            fail "shard $index was done before its pod was deleted; the snapshot is too short"
        if [[ $index == 1 ]]; then
            log "kubectl delete pod $pod (shard $index)"
            kubectl -n "$ns" delete pod "$pod" --wait=false >/dev/null
        else
            log "kubectl delete pod $pod --grace-period=0 --force (shard $index)"
            kubectl -n "$ns" delete pod "$pod" --grace-period=0 --force >/dev/null 2>&1
        fi
    done
    # The operator restarts mid-snapshot too: T0 stays the recorded one.
    log "kubectl delete pods -l app.kubernetes.io/name=dcs-operator (mid-snapshot)"
    kubectl -n "$OPERATOR_NAMESPACE" delete pods -l app.kubernetes.io/name=dcs-operator --wait=false >/dev/null
    some_changes "$db.src" 4011 4020 after-kills
    wait_for "replacement pods for shards 1 and 2" 60 \
        bash -c "(( \$(kubectl -n $ns get pods -l dcs.dev/sync=$name -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null and (.metadata.annotations[\"batch.kubernetes.io/job-completion-index\"] == \"1\" or .metadata.annotations[\"batch.kubernetes.io/job-completion-index\"] == \"2\"))] | length') >= 2 ))"
    doris_faults '{}'
    wait_for "status.snapshot.shardsDone 4/4" 180 \
        bash -c "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.snapshot.shardsDone}') == 4/4 ]]"
    [[ "$(kubectl -n "$ns" get dcs $name | table_cell SHARDS)" == 4/4 ]] ||
        fail "kubectl get dcs shows no SHARDS 4/4: $(kubectl -n "$ns" get dcs $name)"
    wait_phase "$ns" $name Streaming 90
    wait_for "the Job gone, the changelog Deployment there" 60 \
        bash -c "! kubectl -n $ns get job $name-runner >/dev/null 2>&1 && kubectl -n $ns get deployment $name-runner >/dev/null 2>&1"
    # Compared as text: jq reads a TSO (above 2^53) as a float.
    checkpoint_json "$ns" $name | tr -d ' \n' | grep -q "\"startPoint\":{[^}]*\"tso\":$t0}" ||
        fail "the changelog did not start at T0 $t0: $(checkpoint_json "$ns" $name)"
    [[ "$(kubectl -n "$ns" get configmap $name-runner-config -o json | jq -r '.data["sync.yaml"]' |
        awk '/dcs.dev\/snapshot-t0/ { gsub(/[^0-9]/, "", $2); print $2 }')" == "$t0" ]] ||
        fail "T0 changed after the operator restarted"
    some_changes "$db.src" 4021 4030 streaming
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_for "no pre-committed loads left in ${db}_sink" 30 no_precommitted_loads "${db}_sink"
    log "shards $(jget "$ns" $name .status.snapshot.shards)"
}

# 15. A re-initialisation while four shards read (a new reinitNonce mid-snapshot): the shards'
# Job is stopped, every shard's ConfigMap fenced and its pending loads cleaned, their checkpoints
# cleared; the new consumer `<name>-r1` snapshots with one runner (it rebuilds the sink) and
# streams; the sink equals the source and no load is left pre-committed.
scenario_sharded_reinit() {
    local ns=$1 db=e2e_shreinit name=s15
    sharded_source "$db"
    doris_faults '{"http_delay_ms": 100}'
    apply_sharded "$ns" $name "$db"
    wait_for "a shard snapshotting" 60 \
        bash -c "kubectl -n $ns get dcs $name -o json | jq -e '[.status.snapshot.shards[]? | select(.phase == \"Snapshotting\")] | length > 0' >/dev/null"
    [[ "$(jget "$ns" $name .status.snapshot.shardsDone)" != 4/4 ]] || fail "the shards were done before the re-initialisation"
    some_changes "$db.src" 4001 4010 during-snapshot
    log "kubectl patch dcs $name reinitNonce (mid-snapshot)"
    kubectl -n "$ns" patch dcs $name --type merge -p '{"spec":{"reinitNonce":"again-1"}}' >/dev/null
    wait_for "consumer $name-r1" 120 bash -c "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.consumerId}') == $name-r1 ]]"
    [[ "$(jget "$ns" $name .status.lastReinit.reason)" == NonceChanged ]] ||
        fail "lastReinit.reason is '$(jget "$ns" $name .status.lastReinit.reason)', expected NonceChanged"
    local i
    for i in 0 1 2 3; do
        [[ -z "$(kubectl -n "$ns" get configmap "$name-checkpoint-shard-$i" -o json | jq -r '.data["checkpoint.json"] // ""')" ]] ||
            fail "shard $i's checkpoint was not cleared"
    done
    doris_faults '{}'
    wait_phase "$ns" $name Streaming 120
    [[ -z "$(kubectl -n "$ns" get jobs -o name)" ]] || fail "the shards' Job is still there: $(kubectl -n "$ns" get jobs)"
    some_changes "$db.src" 4011 4020 after-reinit
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_for "no pre-committed loads left in ${db}_sink" 30 no_precommitted_loads "${db}_sink"
}

# 16. A sharded sync deleted while its shards read (with loads pre-committed): the finalizer stops
# the Job, fences every shard's ConfigMap, aborts every shard's pending loads under its own labels,
# then lets go; every object is collected and no transaction is left PRECOMMITTED.
scenario_sharded_deletion() {
    local ns=$1 db=e2e_shdelete name=s16
    sharded_source "$db"
    doris_faults '{"http_delay_ms": 100}'
    # A long checkpoint interval keeps each shard's loads pre-committed until the deletion.
    CHECKPOINT_INTERVAL=60s apply_sharded "$ns" $name "$db"
    wait_for "pre-committed loads of two shards or more" 60 bash -c "(( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns |
        jq '[.[] | select(.db == \"${db}_sink\" and .state == \"PRECOMMITTED\") | .label | capture(\"-(?<s>s[0-9]+-of-4)-\").s] | unique | length') >= 2 ))"
    local cms
    cms=$(kubectl -n "$ns" get configmaps -o name | grep -c "$name-checkpoint-shard-" || true)
    [[ "$cms" == 4 ]] || fail "expected 4 shard ConfigMaps, found $cms"
    doris_faults '{}'
    kubectl -n "$ns" delete dcs $name --wait=false >/dev/null
    wait_for "the sync is gone (finalizer released)" 90 bash -c "! kubectl -n $ns get dcs $name >/dev/null 2>&1"
    wait_for "runner pods gone" 60 no_runner_pods "$ns" $name
    wait_for "shard ConfigMaps collected" 60 bash -c "! kubectl -n $ns get configmaps -o name | grep -q $name-checkpoint-shard-"
    local open
    open=$(precommitted_loads "${db}_sink")
    [[ "$open" == 0 ]] || fail "$open Stream Load transactions of the deleted sync are still PRECOMMITTED: $(
        curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns" | jq -c '[.[] | select(.state == "PRECOMMITTED")]')"
}

# 12. The runner pod's probes on a runner that is slow but healthy: doris-emu refuses every
# changelog window as not yet visible (5101), so the runner stays in its visibility wait. The
# kubelet's readiness probe sees /readyz answer 503 (Unhealthy events) and keeps the pod not Ready;
# its liveness probe (/healthz) passes, so the container is never restarted. Once Doris answers,
# the first read succeeds and the pod turns Ready.
scenario_probes() {
    local ns=$1 db=e2e_probes pod
    create_source_table "$db" src
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    doris_faults '{"incr_error": {"code": 5101, "count": 1000000}}'
    trap 'doris_faults "{}" || true' EXIT
    sync_manifest "$ns" p1 "$db.src" "${db}_sink.dst" |
        sed 's/mode: initial/mode: latest/; s/visibleWaitTimeout: 30s/visibleWaitTimeout: 10m/' |
        kubectl apply -f - >/dev/null
    wait_for "the runner pod running" 60 runner_pod_running "$ns" p1
    pod=$(runner_pods "$ns" p1)
    # Readiness: three misses 10 s apart before the kubelet reports it.
    readiness_503() { pod_events "$ns" "$pod" Unhealthy | grep -q 'Readiness probe failed: HTTP probe failed with statuscode: 503'; }
    wait_for "a readiness probe failure with 503 on $pod" 90 readiness_503
    runner_pod_ready "$ns" p1 False || fail "the runner pod is Ready while it has read nothing"
    runner_serves "$ns" "$pod" p1 || fail "the metrics port of $pod is not served by the runner of p1"
    if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
        [[ "$(pod_status "$ns" "$pod" "$RUNNER_METRICS_PORT" /healthz)" == 200 ]] || fail "/healthz of $pod does not answer 200"
        [[ "$(pod_status "$ns" "$pod" "$RUNNER_METRICS_PORT" /readyz)" == 503 ]] || fail "/readyz of $pod does not answer 503"
    fi
    [[ "$(restart_count "$ns" p1)" == 0 ]] || fail "the runner was restarted during its visibility wait"
    ! pod_events "$ns" "$pod" Unhealthy | grep -q Liveness || fail "a liveness probe failed: $(pod_events "$ns" "$pod" Unhealthy)"

    log "doris-emu makes the windows visible again"
    doris_faults '{}'
    wait_for "the runner pod Ready" 60 runner_pod_ready "$ns" p1 True
    wait_phase "$ns" p1 Streaming 60
    [[ "$(restart_count "$ns" p1)" == 0 ]] || fail "the runner container restarted"
    ! pod_events "$ns" "$pod" Unhealthy | grep -q Liveness || fail "a liveness probe failed: $(pod_events "$ns" "$pod" Unhealthy)"
    insert_rows "$db.src" 1 10
    wait_tables_equal "$db.src" "${db}_sink.dst"
}

# shard_commit_refused NS STEP: the adversarial class shard-commit-refused, against a sync of its
# own (a re-initialised consumer's snapshot is read by one runner, so the live sync's next snapshot
# is never sharded): four shards read an 8-tablet table; shard 0's last split is held in doris-emu
# (sql_stall on its tablet) until its first split is committed, then its commits are refused
# (commit_label_contains: its labels only) and the split let go. The shard reads every tablet and
# cannot commit its last loads: it must stay Committing, with the other three Done, the Job kept, no
# Deployment (no hand-over), while its pod fails and is replaced. Once the refusal is lifted, the
# replaced shard commits, the changelog Deployment takes over from T0 and the sink equals the
# source (changes made meanwhile included), with nothing left pre-committed.
shard_commit_refused() {
    local ns=$1 step=$2 name="sc$2" db="e2e_adv_sc$2"
    sharded_source "$db"
    local tablets last
    tablets=$(curl -fsS -u "$DORIS_USER:$DORIS_PASSWORD" -X POST -H 'Content-Type: application/json' \
        "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/api/$db/src/_query_plan" -d "{\"sql\": \"SELECT * FROM $db.src\"}" |
        jq -r '.data.partitions | keys[]')
    # Shard i of 4 reads the tablets whose id mod 4 is i (docs/ARCHITECTURE.md §3.13).
    last=$(tr ' ' '\n' <<<"$tablets" | awk '$1 % 4 == 0' | sort -n | tail -n 1)
    [[ "$last" =~ ^[0-9]+$ && "$(tr ' ' '\n' <<<"$tablets" | awk '$1 % 4 == 0' | wc -l)" -ge 2 ]] ||
        fail "step $step: shard 0 of 4 gets fewer than two of the tablets $(echo $tablets)"
    local stalled
    stalled=$(curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters" | jq '.sql_stalled // 0')
    doris_faults "{\"sql_stall\": {\"contains\": \"TABLET($last)\", \"applied\": true}}"
    apply_sharded "$ns" "$name" "$db"
    shard0() { kubectl -n "$ns" get dcs "$name" -o json | jq -r ".status.snapshot.shards[0].$1 // \"\""; }
    # Shard 0 reads its last tablet (held) and its first is committed: nothing of it pending.
    s0_open() {
        curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns" | jq --arg db "${db}_sink" \
            '[.[] | select(.db == $db and (.label | contains("-s0-of-4-")) and (.state == "PREPARE" or .state == "PRECOMMITTED"))] | length'
    }
    wait_for "step $step: shard 0's last split held, its first committed" 120 bash -c "
        (( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters | jq '.sql_stalled // 0') > $stalled )) &&
        [[ \$(kubectl -n $ns get dcs $name -o json | jq -r '.status.snapshot.shards[0].tabletsDone // 0') == 1 ]] &&
        (( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/txns | jq --arg db ${db}_sink '[.[] | select(.db == \$db and (.label | contains(\"-s0-of-4-\")) and (.state == \"PREPARE\" or .state == \"PRECOMMITTED\"))] | length') == 0 ))"
    some_changes "$db.src" 4001 4010 "step$step-during-snapshot"
    # One PUT: the refusal armed and the split let go together.
    doris_faults '{"commit": {"count": 1000000, "http_status": 503, "message": "injected: the sink FE refuses this shard"}, "commit_label_contains": "-s0-of-4-"}'
    wait_for "step $step: shard 0 Committing (its last loads read, not committed)" 180 \
        bash -c "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.snapshot.shards[0].phase}') == Committing ]]"
    # Its pod fails on the refused commit and the Job replaces it; meanwhile nothing hands over.
    wait_for "step $step: a pod of shard 0 exited 1 on the refused commit" 180 runner_exited_with "$ns" "$name" 1
    wait_for "step $step: the other three shards Done" 120 \
        bash -c "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.snapshot.shardsDone}') == 3/4 ]]"
    [[ "$(shard0 phase)" == Committing ]] || fail "step $step: shard 0 is $(shard0 phase), not Committing, while its commits are refused"
    kubectl -n "$ns" get job "$name-runner" >/dev/null 2>&1 || fail "step $step: the shards' Job is gone while shard 0 is not committed"
    [[ -z "$(kubectl -n "$ns" get deployments -o name | grep "$name-runner" || true)" ]] ||
        fail "step $step: the changelog Deployment exists while shard 0 is not committed (a hand-over)"
    [[ "$(jget "$ns" "$name" .status.phase)" == Snapshotting ]] ||
        fail "step $step: phase $(jget "$ns" "$name" .status.phase) while shard 0 is not committed"
    [[ "$(s0_open)" -gt 0 ]] || fail "step $step: shard 0 has no load pre-committed, yet is Committing"
    log "  shard 0 Committing ($(shard0 message)); no hand-over"
    doris_faults '{}'
    wait_for "step $step: status.snapshot.shardsDone 4/4" 240 \
        bash -c "[[ \$(kubectl -n $ns get dcs $name -o jsonpath='{.status.snapshot.shardsDone}') == 4/4 ]]"
    wait_phase "$ns" "$name" Streaming 120
    wait_for "step $step: the Job gone, the changelog Deployment there" 60 \
        bash -c "! kubectl -n $ns get job $name-runner >/dev/null 2>&1 && kubectl -n $ns get deployment $name-runner >/dev/null 2>&1"
    some_changes "$db.src" 4011 4020 "step$step-streaming"
    wait_tables_equal "$db.src" "${db}_sink.dst" 120
    wait_for "step $step: no pre-committed loads left in ${db}_sink" 60 no_precommitted_loads "${db}_sink"
    kubectl -n "$ns" delete dcs "$name" --wait=false >/dev/null
    wait_for "step $step: sync $name deleted" 90 bash -c "! kubectl -n $ns get dcs $name >/dev/null 2>&1"
}

# audit_writes NS STEP: the adversarial class audit-writes: a sync of its own into a changelog-mode
# (audit) sink whose source (before-images on) is changed while every snapshot split is held in
# doris-emu, and whose runner pod is deleted (forced) meanwhile; then it streams. The sink must be
# the source's history from T0 row for row: the table as of T0 (`FOR VERSION AS OF`, Doris's own
# image) as `+I` rows at T0's TSO, then every change after T0 once (`@incr` DETAIL up to the
# checkpoint's offset) — none of the changes made during the snapshot twice (docs/ARCHITECTURE.md
# §3.4).
audit_writes() {
    local ns=$1 step=$2 name="aw$2" db="e2e_adv_aw$2"
    sql "CREATE DATABASE IF NOT EXISTS $db"
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    sql "CREATE TABLE $db.src (id INT NOT NULL, name VARCHAR(64), score INT, note STRING)
        UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4
        PROPERTIES (\"changelog.enable\" = \"true\", \"changelog.need_historical_value\" = \"true\")"
    insert_rows "$db.src" 1 500 before
    local stalled
    stalled=$(curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters" | jq '.sql_stalled // 0')
    doris_faults '{"sql_stall": {"contains": " TABLET(", "applied": true}}'
    sync_manifest "$ns" "$name" "$db.src" "${db}_sink.dst" |
        sed 's/^      mode: upsert$/      mode: changelog/' | kubectl apply -f - >/dev/null
    wait_for "step $step: $name's snapshot reads a split (held)" 180 bash -c \
        "(( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters | jq '.sql_stalled // 0') > $stalled ))"
    some_changes "$db.src" 501 520 "step$step-held"
    kubectl -n "$ns" delete pods -l "dcs.dev/sync=$name" --grace-period=0 --force >/dev/null 2>&1 || true
    some_changes "$db.src" 521 540 "step$step-restarting"
    doris_faults '{}'
    wait_phase "$ns" "$name" Streaming 180
    some_changes "$db.src" 541 560 "step$step-streaming"
    local last
    last=$(curl -fsS -u "$DORIS_USER:$DORIS_PASSWORD" "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/api/tso" |
        jq '.data.current_tso_physical_time')
    wait_for "step $step: $name's offset past the last write" 120 bash -c \
        "(( \$(kubectl -n $ns get configmap $name-checkpoint -o json | jq -r '.data[\"checkpoint.json\"] // \"{}\"' | jq '.position.offset.epochMs // 0') > $last ))"
    local cp t0 from to expected actual
    cp=$(checkpoint_json "$ns" "$name")
    # A TSO does not fit jq's doubles: read it with Python's integers.
    t0=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["startPoint"]["tso"])' <<<"$cp")
    from=$(jq -r .startPoint.timestamp <<<"$cp")
    to=$(jq -r .position.offset.timestamp <<<"$cp")
    expected=$({
        sql "SELECT id, name, score, note FROM $db.src FOR VERSION AS OF $t0" | awk -v t0="$t0" -F '\t' -v OFS='\t' '{print $0, "+I", t0, 0}'
        sql "SELECT id, name, score, note, __DORIS_BINLOG_OP__, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__ FROM $db.src@incr('startTimestamp' = '$from', 'endTimestamp' = '$to', 'incrementType' = 'DETAIL')" |
            awk -v t0="$t0" -F '\t' -v OFS='\t' 'BEGIN { split("+I -D -U +U", op, " ") } ($6 "") > (t0 "") { $5 = op[$5 + 1]; print }'
    } | sort)
    actual=$(sql "SELECT id, name, score, note, dcs_op, dcs_tso, dcs_lsn FROM ${db}_sink.dst" | sort)
    if [[ "$expected" != "$actual" ]]; then
        diff <(echo "$expected") <(echo "$actual") | head -n 20 >&2
        fail "step $step: the audit sink of $name is not the history from T0 (expected $(wc -l <<<"$expected") rows, got $(wc -l <<<"$actual"))"
    fi
    (( $(grep -c . <<<"$expected") > 500 )) || fail "step $step: no change after T0 in $name's history"
    log "  $name: the audit sink holds the history from T0 ($(wc -l <<<"$actual") rows), the changes made during its snapshot once"
    wait_for "step $step: no pre-committed loads left in ${db}_sink" 60 no_precommitted_loads "${db}_sink"
    kubectl -n "$ns" delete dcs "$name" --wait=false >/dev/null
    wait_for "step $step: sync $name deleted" 90 bash -c "! kubectl -n $ns get dcs $name >/dev/null 2>&1"
}

# columns_of DB TABLE: the table's column names in order, on one line.
columns_of() {
    sql "SELECT ORDINAL_POSITION, COLUMN_NAME FROM information_schema.columns WHERE TABLE_SCHEMA = '$1' AND TABLE_NAME = '$2'" |
        sort -n | cut -f2 | tr '\n' ' '
}

# schema_change NS STEP DB: the adversarial class schema-change on the main sync s13 (schemaChange
# evolve, the default): the source gains a column x<STEP>, rows are written with it, the runner pod
# is force-deleted at once (so the runner may be anywhere between loading the rows before the
# change, the sink's ALTER and the checkpoint after it), and the column the previous schema-change
# step added is dropped. The step's outcome (schema_followed) then wants the sink's columns to be
# the source's and the new column's values in it.
schema_change() {
    local ns=$1 step=$2 db=$3 col="x$2" prev
    prev=$(columns_of "$db" src | tr ' ' '\n' | grep '^x' | head -n 1 || true)
    sql "ALTER TABLE $db.src ADD COLUMN $col INT"
    sql "UPDATE $db.src SET $col = id * $step WHERE id <= 10"
    kubectl -n "$ns" delete pods -l dcs.dev/sync=s13 --grace-period=0 --force >/dev/null 2>&1 || true
    [[ -z "$prev" ]] || sql "ALTER TABLE $db.src DROP COLUMN $prev"
    sql "UPDATE $db.src SET $col = id + $step WHERE id > 10 AND id <= 15"
}

# schema_followed DB COLUMN: the sink has the source's columns, and COLUMN's values.
schema_followed() {
    local db=$1 col=$2
    [[ "$(columns_of "$db" src)" == "$(columns_of "${db}_sink" dst)" ]] &&
        [[ "$(sql "SELECT id, $col FROM $db.src ORDER BY id")" == "$(sql "SELECT id, $col FROM ${db}_sink.dst ORDER BY id")" ]]
}

# fence_during_a_save NS STEP: the adversarial class fence-ambiguous-save (on the bed, whose fault
# proxy stands between this namespace's pods and the API server): the runner's next request is
# held once the API server has answered it; when it was a write of the checkpoint ConfigMap (a
# save or a claim, applied), the ConfigMap is fenced as the operator fences it (`dcs.dev/fenced`)
# and only then is the answer lost (the runner's connection reset). The runner must stop with
# exit 4 (FencedAfterUnclearSave), and the first write of the ConfigMap after the fence must be a
# new claim (a restarted runner's), never the fenced runner's save: every version after the fence
# is watched from the fence's resourceVersion on. A held request that was no write (a read, a
# refused write) is let go and the next one held, up to five times.
fence_during_a_save() {
    local ns=$1 step=$2 cm=s13-checkpoint attempt pod restarts before after fence_rv="" claim
    proxy() { curl -fsS -X "$1" "$POD_API_PROXY$2"; }
    cm_field() { kubectl -n "$ns" get configmap "$cm" -o json | jq -r "$1"; }
    for ((attempt = 1; attempt <= 5; attempt++)); do
        wait_for "step $step: one runner pod running" 120 runner_pod_running "$ns" s13
        pod=$(runner_pods "$ns" s13)
        restarts=$(restart_count "$ns" s13)
        before=$(cm_field .metadata.resourceVersion)
        proxy POST /hold >/dev/null
        if ! (wait_for "step $step: the runner's next request answered by the API server" 30 \
            bash -c "curl -fsS $POD_API_PROXY/ | jq -e .applied >/dev/null"); then
            proxy POST /disarm >/dev/null
            continue
        fi
        after=$(cm_field .metadata.resourceVersion)
        if [[ "$after" == "$before" ]]; then
            proxy POST /release >/dev/null
            continue
        fi
        kubectl -n "$ns" annotate configmap "$cm" --overwrite "dcs.dev/fenced=adversarial step $step at $(date -u +%H:%M:%S.%N)" -o json \
            >"$WORK/fence-$step.json"
        fence_rv=$(jq -r .metadata.resourceVersion "$WORK/fence-$step.json")
        [[ "$fence_rv" != "$after" ]] || fail "step $step: the fence did not change $cm (resourceVersion $after)"
        claim=$(jq -r '.metadata.annotations["dcs.dev/claimed-by"] // ""' "$WORK/fence-$step.json")
        # Every version of the ConfigMap after the fence's (a watch from its resourceVersion).
        timeout 120 kubectl get --raw "/api/v1/namespaces/$ns/configmaps?watch=1&fieldSelector=metadata.name%3D$cm&resourceVersion=$fence_rv" \
            >"$WORK/fence-$step.watch" 2>/dev/null &
        local watcher=$!
        proxy POST /release >/dev/null
        log "  the runner's write (resourceVersion $before -> $after) applied, fenced at $fence_rv, its answer lost"
        break
    done
    [[ -n "$fence_rv" ]] || fail "step $step: in five holds no request of the runner wrote its checkpoint ConfigMap"
    exited_4_after() {
        kubectl -n "$ns" get pod "$pod" -o json | jq -e --argjson r "$restarts" \
            '.status.containerStatuses[0] | .restartCount > $r and .lastState.terminated.exitCode == 4' >/dev/null
    }
    wait_for "step $step: the runner fenced during its unclear save stops with exit 4" 90 exited_4_after
    local previous
    previous=$(kubectl -n "$ns" logs "$pod" --previous 2>&1)
    grep -q "after a save whose answer was lost" <<<"$previous" ||
        fail "step $step: the runner's exit 4 is not FencedAfterUnclearSave: $(tail -n 5 <<<"$previous")"
    # The first write after the fence: a new claim, the checkpoint as the fence left it.
    wait_for "step $step: a write of $cm after the fence (the restarted runner's claim)" 90 \
        bash -c "grep -q '\"type\":\"MODIFIED\"' '$WORK/fence-$step.watch'"
    kill "$watcher" 2>/dev/null || true
    local first
    first=$(grep -m 1 '"type":"MODIFIED"' "$WORK/fence-$step.watch")
    [[ "$(jq -r '.object.metadata.annotations["dcs.dev/claimed-by"] // ""' <<<"$first")" != "$claim" &&
        "$(jq -c '.object.data' <<<"$first")" == "$(jq -c .data "$WORK/fence-$step.json")" ]] ||
        fail "step $step: the fenced runner wrote $cm after the fence (claim '$claim' before, the write: $(jq -c '{rv: .object.metadata.resourceVersion, claim: .object.metadata.annotations["dcs.dev/claimed-by"], data: .object.data}' <<<"$first"))"
    [[ "$(jq -r '.object.metadata.annotations["dcs.dev/fenced"] // ""' <<<"$first")" == "$(jq -r '.metadata.annotations["dcs.dev/fenced"]' "$WORK/fence-$step.json")" ]] ||
        fail "step $step: the write after the fence dropped the fence annotation"
    log "  exit 4; the first write after the fence is a new claim ($(jq -r '.object.metadata.annotations["dcs.dev/claimed-by"]' <<<"$first"))"
}

# 13. The in-cluster adversarial run: a seeded random sequence of steps against a live sync, each
# one or two faults applied back to back (runner pod deleted, runner process SIGKILLed, operator pod
# deleted, Doris's clock moved short of or past the TTL, the TTL lowered or raised, Stream Load
# answering 5xx, Doris refusing connections, Doris answering slowly, a TRUNCATE under a
# re-initialisation's snapshot, a shard's last commit refused (shard_commit_refused), the
# operator's fence during a save whose answer is lost (fence_during_a_save), writes through an
# audit sink's held snapshot (audit_writes), a column added to and one dropped from the source with
# the runner killed at once (schema_change)) while the source
# changes. After
# every step: the sink equals the source, the sync is Streaming, and the consumer moved to the next
# generation (`lastReinit` OffsetExpired naming the previous one) exactly when the step's clock
# moved past the TTL, never otherwise; at the end no load is left pre-committed and no pod
# panicked. E2E_SEED picks the sequence (printed; the same seed replays the same steps),
# E2E_ADVERSARIAL_STEPS how many (default 13), E2E_ADVERSARIAL_CLASSES among which classes.
scenario_adversarial() {
    local ns=$1 db=e2e_adv seed=${E2E_SEED:-20269663} steps=${E2E_ADVERSARIAL_STEPS:-13}
    RANDOM=$seed
    log "adversarial: seed $seed, $steps steps (E2E_SEED=$seed E2E_ADVERSARIAL_STEPS=$steps e2e/run.sh adversarial replays them)"
    local ttl=600 low_ttl=400
    create_source_table "$db" src "\"changelog.ttl_seconds\" = \"$ttl\""
    start_sync "$ns" s13 "$db"
    local oplogs=$WORK/logs/adversarial/operator
    follow_logs "$OPERATOR_NAMESPACE" "$oplogs" &
    ADV_OPLOGS=$!
    trap 'kill ${ADV_OPLOGS:-} 2>/dev/null || true; doris_faults "{}" 2>/dev/null || true' EXIT
    local base consumer gen=0 next=21 step checks=0 reinits=0
    base=$(jget "$ns" s13 .status.consumerId)
    consumer=$base
    local -A faults=()
    local classes=(pod-delete sigkill operator-delete clock-short clock-past ttl-lower ttl-raise sink-5xx doris-refuses doris-slow tablets-replaced shard-commit-refused fence-ambiguous-save audit-writes schema-change)
    # E2E_ADVERSARIAL_CLASSES: only these classes (a seed then picks among them).
    [[ -z "${E2E_ADVERSARIAL_CLASSES:-}" ]] || read -r -a classes <<<"$E2E_ADVERSARIAL_CLASSES"
    for ((step = 1; step <= steps; step++)); do
        # One or two faults; the step's clock jump must be clearly short of the TTL (by more than
        # the runner's safety margin plus a pod restart's lag) or clearly past it: in between both
        # outcomes would be right.
        local picked=() n=$((1 + RANDOM % 2)) jump=0 ttl_before=$ttl ttl_after=$ttl k c tries
        for ((k = 0; k < n; k++)); do
            for ((tries = 0; tries < 20; tries++)); do
                c=${classes[RANDOM % ${#classes[@]}]}
                case $c in
                    ttl-lower) ((ttl_after == ttl && ttl == 600)) || continue; ttl_after=$low_ttl ;;
                    ttl-raise) ((ttl_after == ttl && ttl == low_ttl)) || continue; ttl_after=600 ;;
                    clock-short | clock-past) ((jump == 0)) || continue; jump=1 ;;
                    # Alone in its step: it re-initialises twice on its own.
                    tablets-replaced) ((n == 1)) || continue ;;
                    # Alone in its step: a sync of its own, snapshotted by shards.
                    shard-commit-refused) ((n == 1)) || continue ;;
                    # Alone in its step: a sync of its own, into an audit sink.
                    audit-writes) ((n == 1)) || continue ;;
                    # Alone in its step: its check wants the source's columns in the sink.
                    schema-change) ((n == 1)) || continue ;;
                    # On the bed only: its fault proxy loses the save's answer. Not after a jump
                    # past the TTL in its step: the re-initialisation replaces the runner (and
                    # fences its ConfigMap itself) meanwhile.
                    fence-ambiguous-save)
                        [[ -n "${POD_API_PROXY:-}" && " ${picked[*]} " != *" clock-past "* ]] || continue ;;
                esac
                break
            done
            picked+=("$c")
        done
        local lo=$((ttl_before < ttl_after ? ttl_before : ttl_after)) hi=$((ttl_before > ttl_after ? ttl_before : ttl_after))
        local expect_reinit=0 expect_moved=0 jumps=() schema_step=
        for c in "${picked[@]}"; do
            case $c in
                clock-short) jumps+=($((30 + RANDOM % (lo - 210)))) ;;
                clock-past) jumps+=($((hi + 30 + RANDOM % 300))); expect_reinit=1 ;;
                *) jumps+=(0) ;;
            esac
        done
        log "adversarial step $step/$steps: ${picked[*]} (clock +$(IFS=+; echo "$((${jumps[*]}))") s, TTL $ttl_before -> $ttl_after s)"
        some_changes "$db.src" $((next + 1)) $((next + 10)) "step$step-before"
        next=$((next + 10))
        for ((k = 0; k < ${#picked[@]}; k++)); do
            c=${picked[k]}
            faults[$c]=$((${faults[$c]:-0} + 1))
            case $c in
                pod-delete)
                    local pod
                    pod=$(runner_pods "$ns" s13 | head -n 1)
                    # The pod may be gone meanwhile (a re-initialisation in the same step replaces it).
                    [[ -z "$pod" ]] || kubectl -n "$ns" delete pod "$pod" --wait=false --ignore-not-found >/dev/null ;;
                sigkill)
                    if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
                        local pid
                        pid=$(runner_pid "$ns") && kill -KILL "$pid" 2>/dev/null || true
                    else
                        kubectl -n "$ns" delete pods -l dcs.dev/sync=s13 --grace-period=0 --force >/dev/null 2>&1 || true
                    fi ;;
                operator-delete)
                    kubectl -n "$OPERATOR_NAMESPACE" delete pods -l app.kubernetes.io/name=dcs-operator --wait=false >/dev/null ;;
                clock-short | clock-past)
                    log "  clock: $(doris_clock_advance "${jumps[k]}")" ;;
                ttl-lower | ttl-raise)
                    ttl=$ttl_after
                    sql "ALTER TABLE $db.src SET (\"changelog.ttl_seconds\" = \"$ttl\")" ;;
                sink-5xx)
                    doris_faults "{\"stream_load\": {\"count\": $((1 + RANDOM % 4)), \"http_status\": $((RANDOM % 2 ? 500 : 503))}}" ;;
                doris-refuses)
                    local ms=$((1000 + RANDOM % 7000))
                    doris_faults "{\"refuse_connections_ms\": $ms}"
                    sleep "$((ms / 1000 + 1))" ;;
                tablets-replaced)
                    # A re-initialisation (a new reinitNonce) whose snapshot is caught mid-read (its
                    # first splits' answers held) by a TRUNCATE and new rows: the runner stops with
                    # exit 5 and the operator reads the snapshot again under yet another consumer.
                    local stalled
                    stalled=$(curl -fsS "http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters" | jq '.sql_stalled // 0')
                    doris_faults '{"sql_stall": {"contains": " TABLET(", "applied": true}}'
                    kubectl -n "$ns" patch dcs s13 --type merge -p "{\"spec\":{\"reinitNonce\":\"adv-$step\"}}" >/dev/null
                    wait_for "step $step: the re-initialised snapshot reads a split" 180 bash -c \
                        "(( \$(curl -fsS http://$DORIS_HOST:$DORIS_FE_HTTP_PORT/_emu/counters | jq '.sql_stalled // 0') > $stalled ))"
                    sql "TRUNCATE TABLE $db.src"
                    some_changes "$db.src" $((next + 1)) $((next + 10)) "step$step-truncated"
                    next=$((next + 10))
                    doris_faults '{}'
                    expect_moved=1 ;;
                shard-commit-refused)
                    shard_commit_refused "$ns" "$step" ;;
                fence-ambiguous-save)
                    fence_during_a_save "$ns" "$step" ;;
                audit-writes)
                    audit_writes "$ns" "$step" ;;
                schema-change)
                    schema_change "$ns" "$step" "$db"
                    schema_step=$step ;;
                doris-slow)
                    local ms=$((200 + RANDOM % 2000))
                    doris_faults "{\"http_delay_ms\": $ms}"
                    some_changes "$db.src" $((next + 1)) $((next + 10)) "step$step-slow"
                    next=$((next + 10))
                    sleep 5
                    doris_faults '{}' ;;
            esac
        done
        some_changes "$db.src" $((next + 1)) $((next + 10)) "step$step-after"
        next=$((next + 10))

        # The step's outcome.
        if ((expect_reinit)); then
            local want="$base-r$((gen + 1))"
            wait_for "step $step: the clock passed the TTL, so consumer $want (reinit)" 180 \
                bash -c "[[ \"\$(kubectl -n $ns get dcs s13 -o jsonpath='{.status.consumerId}')\" == '$want' ]]"
            [[ "$(jget "$ns" s13 .status.lastReinit.reason)" == OffsetExpired ]] ||
                fail "step $step: lastReinit.reason is '$(jget "$ns" s13 .status.lastReinit.reason)', not OffsetExpired"
            [[ "$(jget "$ns" s13 .status.lastReinit.previousConsumerId)" == "$consumer" ]] ||
                fail "step $step: lastReinit.previousConsumerId is not $consumer"
            gen=$((gen + 1))
            consumer=$want
            reinits=$((reinits + 1))
        fi
        if ((expect_moved)); then
            # The nonce's consumer, then the one that reads the snapshot again.
            local want="$base-r$((gen + 2))"
            wait_for "step $step: the tablets moved under $base-r$((gen + 1))'s snapshot, so consumer $want" 240 \
                bash -c "[[ \"\$(kubectl -n $ns get dcs s13 -o jsonpath='{.status.consumerId}')\" == '$want' ]]"
            [[ "$(jget "$ns" s13 .status.lastReinit.reason)" == SnapshotTabletsChanged ]] ||
                fail "step $step: lastReinit.reason is '$(jget "$ns" s13 .status.lastReinit.reason)', not SnapshotTabletsChanged"
            gen=$((gen + 2))
            consumer=$want
            reinits=$((reinits + 2))
        fi
        wait_phase "$ns" s13 Streaming 180
        wait_tables_equal "$db.src" "${db}_sink.dst" 180
        if [[ -n "$schema_step" ]]; then
            wait_for "step $step: the sink follows the source's columns ($(columns_of "$db" src))" 120 \
                schema_followed "$db" "x$schema_step"
            # A consumer that met the change says so (one begun after it, in a re-initialisation
            # of the same step, never met it: it read the new columns from its start).
            ((expect_reinit || expect_moved)) ||
                wait_for "step $step: status.sink.lastSchemaChange says the change was followed" 60 \
                bash -c "kubectl -n $ns get dcs s13 -o json | jq -e '.status.sink.lastSchemaChange | .action == \"Followed\" and (.added | index(\"x$schema_step\"))' >/dev/null"
            log "  s13 follows the source's columns: $(columns_of "${db}_sink" dst)"
        fi
        [[ "$(jget "$ns" s13 .status.consumerId)" == "$consumer" ]] ||
            fail "step $step: consumer $(jget "$ns" s13 .status.consumerId), expected $consumer (a reinit without an expiry, or more than one)"
        checks=$((checks + 1))
    done
    doris_faults '{}'
    wait_for "no pre-committed loads left in ${db}_sink" 60 no_precommitted_loads "${db}_sink"
    local reinit_events
    # Each re-initialisation has its event, whose note names its new consumer ("…; starting again
    # as consumer s13-r1"): count the distinct consumers. An operator replaced in the middle of a re-initialisation (operator-delete) does it
    # again, to the same consumer, and publishes its event again (Kubernetes events are at least
    # once across operator restarts); an extra re-initialisation would name another consumer, and
    # each step's consumer check above catches it too.
    reinit_events=$(kubectl -n "$ns" get events -o json | jq '[.items[] | select(.reason == "Reinitialized") | .message | (capture("starting again as consumer (?<c>[^ ]+)").c // .)] | unique | length')
    ((reinit_events == reinits)) || fail "$reinit_events re-initialisations in Reinitialized events for $reinits expiries"
    kill "$ADV_OPLOGS" 2>/dev/null || true
    if grep -l "panicked at" "$WORK/logs/adversarial"/*.log "$oplogs"/*.log 2>/dev/null; then
        fail "a pod panicked (the files above)"
    fi
    local summary="" f
    for f in "${!faults[@]}"; do summary+="${summary:+, }$f ${faults[$f]}"; done
    log "adversarial: seed $seed, $steps steps, faults: $summary; $checks checks held, $reinits expiries answered with a reinit"
}

# 17. TLS to Doris: a doris-emu of the scenario's own serving only TLS, with its own CA, kept in a
# ConfigMap; a sync with TLS on both sides is probed by the operator over TLS, its runner pod gets
# the CA mounted, and it streams: the sink follows every change, status.tls says Verified. A sync
# whose CA bundle is in a Secret that did not opt in is Blocked and gets no runner.
scenario_tls() {
    local ns=$1 db=e2e_tls dir pid ports
    dir=$(mktemp -d "${TMPDIR:-/tmp}/dcs-e2e-tls.XXXXXX")
    DORIS_EMU_PASSWORD=$DORIS_PASSWORD "$BIN/dcs-doris-emu" --host "$DORIS_HOST" --user "$DORIS_USER" \
        --fe-http-port 0 --be-http-port 0 --query-port 0 --fe-flight-port 0 --be-flight-port 0 \
        --tls-self-signed "$dir/pki" >"$dir/emu.json" 2>"$dir/emu.log" &
    pid=$!
    # shellcheck disable=SC2064 # expanded now: the trap runs after the locals are gone
    trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf '$dir'" EXIT
    ports=$(first_line "$dir/emu.json" 30 "$pid") || fail "the TLS doris-emu did not start: $(tail -n 5 "$dir/emu.log")"
    [[ "$(jq -r .tls <<<"$ports")" == true ]] || fail "doris-emu does not say it serves TLS: $ports"
    # From here on every helper talks to this emulator (the scenario runs in a subshell of its own).
    DORIS_FE_HTTP_PORT=$(jq -r .fe_http_port <<<"$ports")
    DORIS_BE_HTTP_PORT=$(jq -r .be_http_port <<<"$ports")
    DORIS_QUERY_PORT=$(jq -r .query_port <<<"$ports")
    DORIS_FE_FLIGHT_PORT=$(jq -r .fe_flight_port <<<"$ports")
    DORIS_TLS_CA=$dir/pki/ca.pem
    export DORIS_FE_HTTP_PORT DORIS_BE_HTTP_PORT DORIS_QUERY_PORT DORIS_FE_FLIGHT_PORT DORIS_TLS_CA
    # A plaintext client is refused: nothing below can have gone over plaintext.
    if mysql --protocol=TCP -h "$DORIS_HOST" -P "$DORIS_QUERY_PORT" -u "$DORIS_USER" "-p$DORIS_PASSWORD" \
        --skip-ssl -N -B -e "SELECT 1" >/dev/null 2>&1; then
        fail "the TLS doris-emu accepted a plaintext MySQL login"
    fi

    kubectl -n "$ns" create configmap doris-ca --from-file=ca.crt="$DORIS_TLS_CA" >/dev/null
    local tls="{enabled: true, caBundle: {configMapKeyRef: {name: doris-ca, key: ca.crt}}}"
    create_source_table "$db" src
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    insert_rows "$db.src" 1 20
    sync_manifest "$ns" t1 "$db.src" "${db}_sink.dst" |
        sed -e "s|^    flightSqlPort: .*|&\n    tls: $tls|" -e "s|^      labelPrefix: e2e|&\n      tls: $tls|" |
        kubectl apply -f - >/dev/null
    wait_phase "$ns" t1 Streaming 90
    wait_tables_equal "$db.src" "${db}_sink.dst"
    [[ "$(jget "$ns" t1 .status.tls.source)/$(jget "$ns" t1 .status.tls.sink)" == Verified/Verified ]] ||
        fail "status.tls is not Verified on both sides: $(jget "$ns" t1 .status.tls)"
    local pod
    pod=$(runner_pods "$ns" t1)
    [[ "$(kubectl -n "$ns" get pod "$pod" -o jsonpath='{.spec.containers[0].env[?(@.name=="DCS_SOURCE_TLS_CA_FILE")].value}')" == /etc/dcs-tls/source/ca.crt ]] ||
        fail "the runner pod does not name the mounted source CA"
    some_changes "$db.src" 21 40 tls
    wait_tables_equal "$db.src" "${db}_sink.dst"

    # A CA bundle in a Secret that did not opt in: not used, no runner, the fix in the message.
    kubectl -n "$ns" create secret generic doris-ca-secret --from-file=ca.crt="$DORIS_TLS_CA" >/dev/null
    local in_secret="{enabled: true, caBundle: {secretKeyRef: {name: doris-ca-secret, key: ca.crt}}}"
    sync_manifest "$ns" t2 "$db.src" "${db}_sink.dst2" |
        sed -e "s|^    flightSqlPort: .*|&\n    tls: $in_secret|" -e "s|^      labelPrefix: e2e|&\n      tls: $tls|" |
        kubectl apply -f - >/dev/null
    wait_phase "$ns" t2 Blocked 60
    [[ "$(condition "$ns" t2 Ready reason)" == CaBundleNotAllowed ]] ||
        fail "t2 is not blocked for its CA Secret: $(condition "$ns" t2 Ready message)"
    condition "$ns" t2 Ready message | grep -q "kubectl -n $ns annotate secret doris-ca-secret dcs.dev/allowed-syncs=t2" ||
        fail "the message does not say what to add: $(condition "$ns" t2 Ready message)"
    no_runner_pods "$ns" t2 || fail "a runner was started for t2"
    kubectl -n "$ns" delete dcs t1 t2 --wait=false >/dev/null
    wait_for "syncs deleted" 60 no_syncs_in "$ns"
}

# 11. The chart's other install: two replicas with leader election and RBAC granted only in the
# watched namespace (rbac.namespaced, watchNamespaces). The operator works with exactly that RBAC,
# ignores syncs elsewhere, and a standby takes over when the leader's pod is deleted. Replaces the
# cluster-wide install, so it runs last.
scenario_ha_namespaced() {
    local ns=$1 other="$1-other" db=e2e_ha
    new_namespace "$other"
    # shellcheck disable=SC2064 # expanded now
    trap "(delete_namespace '$other') >/dev/null 2>&1 || true" EXIT

    log "replacing the operator: 2 replicas, leader election, RBAC only in $ns"
    "$HELM" uninstall "$RELEASE" --namespace "$OPERATOR_NAMESPACE" >/dev/null
    wait_for "the cluster-wide operator gone" 60 bash -c \
        "[[ -z \$(kubectl -n $OPERATOR_NAMESPACE get pods -l app.kubernetes.io/name=dcs-operator -o name) ]]"
    # On the bed also the NetworkPolicies (nothing enforces them there; the API server validates
    # them and the selection is checked below) and the dashboard ConfigMap; with the Prometheus
    # Operator's CRDs (always on the bed) the ServiceMonitor, the PodMonitor and the PrometheusRule.
    local extra=()
    [[ -n "${E2E_KUBECONFIG:-}" ]] || extra=(--set networkPolicy.enabled=true
        --set 'networkPolicy.apiServer.cidrs={127.0.0.1/32}' --set "networkPolicy.doris.cidrs={$DORIS_HOST/32}"
        --set grafanaDashboard.enabled=true)
    [[ -z "${PROMETHEUS_CRDS:-}" ]] || extra+=(--set metrics.serviceMonitor.enabled=true
        --set runner.podMonitor.enabled=true --set prometheusRule.enabled=true)
    helm_operator install --set rbac.namespaced=true --set "watchNamespaces={$ns}" \
        --set leaderElection.enabled=true --set replicaCount=2 "${extra[@]}" >/dev/null
    wait_for "two operator pods Ready" 90 operator_pods_ready 2
    local as
    as="system:serviceaccount:$OPERATOR_NAMESPACE:$(kubectl -n "$OPERATOR_NAMESPACE" get pods \
        -l app.kubernetes.io/name=dcs-operator -o jsonpath='{.items[0].spec.serviceAccountName}')"
    kubectl --as="$as" -n "$ns" get dorischangelogsyncs >/dev/null || fail "$as cannot list syncs in $ns"
    ! kubectl --as="$as" get dorischangelogsyncs -A >/dev/null 2>&1 || fail "$as may list syncs in all namespaces"
    ! kubectl --as="$as" -n "$other" get dorischangelogsyncs >/dev/null 2>&1 || fail "$as may list syncs in $other"

    create_source_table "$db" src
    start_sync "$ns" s11 "$db"
    # A sync outside watchNamespaces is not touched: no finalizer, no status, no runner.
    sync_manifest "$other" s11 "$db.src" "${db}_sink.other" | kubectl apply -f - >/dev/null
    wait_for "the leader Lease held" 30 bash -c \
        "[[ -n \$(kubectl -n $OPERATOR_NAMESPACE get lease dcs-operator -o jsonpath='{.spec.holderIdentity}') ]]"
    local leader
    leader=$(kubectl -n "$OPERATOR_NAMESPACE" get lease dcs-operator -o jsonpath='{.spec.holderIdentity}')
    log "leader: $leader"
    kubectl -n "$OPERATOR_NAMESPACE" get pod "$leader" >/dev/null || fail "the Lease holder $leader is not an operator pod"
    [[ -z "$(kubectl -n "$other" get dcs s11 -o jsonpath='{.metadata.finalizers}{.status.phase}')" ]] ||
        fail "the operator touched a sync outside watchNamespaces"
    [[ -z "$(kubectl -n "$other" get deployments -o name)" ]] || fail "a runner was started outside watchNamespaces"

    # The chart's alerts and dashboard use only what the running operator and runner export: as the
    # API server stored them when they were installed, else as the chart renders them.
    local scraped runner
    scraped=$(mktemp -d)
    runner=$(runner_pods "$ns" s11)
    # The leader's gauges come from its watch cache, which receives the status write a moment
    # after kubectl has shown it (and is empty for a moment after any restart of the
    # controller): the Ready condition must show within seconds, not at the same instant.
    leader_shows_ready() {
        pod_metrics "$OPERATOR_NAMESPACE" "$leader" "$METRICS_PORT" >"$scraped/operator.txt" &&
            grep -q '^dcs_sync_condition{namespace="'"$ns"'",name="s11",type="Ready",status="True"' "$scraped/operator.txt" ||
            { grep dcs_sync_condition "$scraped/operator.txt"; return 1; }
    }
    wait_for "the leader's /metrics shows the Ready condition of s11" 30 leader_shows_ready
    pod_metrics "$ns" "$runner" "$RUNNER_METRICS_PORT" >"$scraped/runner.txt"
    if [[ -n "${PROMETHEUS_CRDS:-}" && -z "${E2E_KUBECONFIG:-}" ]]; then
        kubectl -n "$OPERATOR_NAMESPACE" get "prometheusrule/$RELEASE" "configmap/$RELEASE-dashboard" -o yaml >"$scraped/chart.yaml"
    else
        "$HELM" template "$RELEASE" "$CHART" --namespace "$OPERATOR_NAMESPACE" \
            --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true >"$scraped/chart.yaml"
    fi
    python3 charts/metrics_check.py "$scraped/chart.yaml" --scrape "$scraped/operator.txt" "$scraped/runner.txt" ||
        fail "the chart's alerts or dashboard use metrics or labels the operator and the runner do not export"
    rm -rf "$scraped"
    # selected_pods NS SELECTOR_JSON: the pods of NS a matchLabels selector selects, sorted.
    selected_pods() {
        local sel
        sel=$(jq -r '.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$2")
        kubectl -n "$1" get pods -l "$sel" -o json |
            jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | sort | join(" ")'
    }
    local operators
    operators=$(kubectl -n "$OPERATOR_NAMESPACE" get pods -l app.kubernetes.io/name=dcs-operator -o json |
        jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .metadata.name] | sort | join(" ")')
    if [[ -n "${PROMETHEUS_CRDS:-}" ]]; then
        # The PodMonitor looks in the watched namespace and selects the runner pod there; the
        # ServiceMonitor selects the metrics Service, whose endpoints are the operator pods.
        local podmon svcmon
        podmon=$(kubectl -n "$OPERATOR_NAMESPACE" get podmonitor "$RELEASE-runners" -o json)
        [[ "$(jq -c .spec.namespaceSelector <<<"$podmon")" == "{\"matchNames\":[\"$ns\"]}" ]] ||
            fail "PodMonitor namespaceSelector is $(jq -c .spec.namespaceSelector <<<"$podmon"), not $ns"
        [[ "$(selected_pods "$ns" "$(jq -c .spec.selector <<<"$podmon")")" == "$runner" ]] ||
            fail "PodMonitor $RELEASE-runners does not select exactly the runner pod $runner"
        svcmon=$(kubectl -n "$OPERATOR_NAMESPACE" get servicemonitor "$RELEASE" -o json)
        local sel svc
        sel=$(jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"$svcmon")
        svc=$(kubectl -n "$OPERATOR_NAMESPACE" get services -l "$sel" -o jsonpath='{.items[*].metadata.name}')
        [[ "$svc" == "$RELEASE-metrics" ]] || fail "ServiceMonitor $RELEASE selects Services '$svc', not $RELEASE-metrics"
        [[ "$(jq -r '.spec.groups[].rules[].alert' <(kubectl -n "$OPERATOR_NAMESPACE" get prometheusrule "$RELEASE" -o json) | wc -l)" == 10 ]] ||
            fail "the stored PrometheusRule does not hold the ten alerts"
        log "PrometheusRule, ServiceMonitor and PodMonitor stored by the API server and selecting what they should"
    fi
    if [[ -z "${E2E_KUBECONFIG:-}" ]]; then
        local np
        np=$(kubectl -n "$ns" get networkpolicy "$RELEASE-runners" -o json | jq -c .spec.podSelector)
        [[ "$(selected_pods "$ns" "$np")" == "$runner" ]] ||
            fail "NetworkPolicy $ns/$RELEASE-runners selects '$(selected_pods "$ns" "$np")', not the runner pod $runner"
        np=$(kubectl -n "$OPERATOR_NAMESPACE" get networkpolicy "$RELEASE" -o json | jq -c .spec.podSelector)
        [[ "$(selected_pods "$OPERATOR_NAMESPACE" "$np")" == "$operators" ]] ||
            fail "NetworkPolicy $OPERATOR_NAMESPACE/$RELEASE selects '$(selected_pods "$OPERATOR_NAMESPACE" "$np")', not the operator pods $operators"
        kubectl -n "$OPERATOR_NAMESPACE" get configmap "$RELEASE-dashboard" -o jsonpath='{.metadata.labels.grafana_dashboard}' |
            grep -qx 1 || fail "no dashboard ConfigMap with the sidecar label"
    fi

    # Fail over: the leader's pod goes, the standby takes the Lease and reconciles.
    log "kubectl delete pod $leader"
    kubectl -n "$OPERATOR_NAMESPACE" delete pod "$leader" --wait=false >/dev/null
    wait_for "another operator pod holds the Lease" 60 bash -c \
        "h=\$(kubectl -n $OPERATOR_NAMESPACE get lease dcs-operator -o jsonpath='{.spec.holderIdentity}'); [[ -n \$h && \$h != $leader ]]"
    log "new leader: $(kubectl -n "$OPERATOR_NAMESPACE" get lease dcs-operator -o jsonpath='{.spec.holderIdentity}')"
    some_changes "$db.src" 21 30 after-failover
    wait_tables_equal "$db.src" "${db}_sink.dst"
    kubectl -n "$ns" patch dcs s11 --type merge -p '{"spec":{"suspend":true}}' >/dev/null
    wait_phase "$ns" s11 Suspended 60
    wait_for "runner pods gone" 60 no_runner_pods "$ns" s11
    [[ -z "$(kubectl -n "$other" get dcs s11 -o jsonpath='{.metadata.finalizers}{.status.phase}')" ]] ||
        fail "the new leader touched a sync outside watchNamespaces"
}

# 18. A change of the source's columns under spec.sink.doris.schemaChange (docs/ARCHITECTURE.md
# §3.14): `fail` holds the sync Blocked (SchemaChanged, a Warning event, no runner workload) with
# nothing of the new column written; `ignore` lets it go on with the sink's columns
# (status.sink.ignoredColumns, lastSchemaChange Ignored, a SchemaChanged event); `evolve` then adds
# the column, and the rows written after carry its values.
scenario_schema_policy() {
    local ns=$1 db=e2e_schema name=sp
    create_source_table "$db" src
    sql "CREATE DATABASE IF NOT EXISTS ${db}_sink"
    insert_rows "$db.src" 1 20
    sync_manifest "$ns" "$name" "$db.src" "${db}_sink.dst" |
        sed 's/^      mode: upsert$/      mode: upsert\n      schemaChange: fail/' | kubectl apply -f - >/dev/null
    wait_phase "$ns" "$name" Streaming 90
    wait_tables_equal "$db.src" "${db}_sink.dst"
    local before
    before=$(columns_of "${db}_sink" dst)
    sql "ALTER TABLE $db.src ADD COLUMN level INT"
    insert_rows "$db.src" 21 25 with-level
    sql "UPDATE $db.src SET level = id WHERE id <= 5 OR id > 20"
    wait_phase "$ns" "$name" Blocked 120
    [[ "$(condition "$ns" "$name" Ready reason)" == SchemaChanged ]] ||
        fail "Ready's reason is '$(condition "$ns" "$name" Ready reason)', not SchemaChanged"
    [[ "$(condition "$ns" "$name" Ready message)" == *"added \`level\`"*"schemaChange is fail"* ]] ||
        fail "Ready's message does not describe the change: $(condition "$ns" "$name" Ready message)"
    [[ "$(jget "$ns" "$name" .status.sink.lastSchemaChange.action)" == Refused ]] ||
        fail "status.sink.lastSchemaChange: $(jget "$ns" "$name" .status.sink.lastSchemaChange)"
    wait_for "no runner workload while Blocked" 60 bash -c "[[ -z \"\$(kubectl -n $ns get deployments,jobs -o name)\" ]]"
    wait_for "a SchemaChanged Warning event" 30 \
        bash -c "kubectl -n $ns get events -o json | jq -e '[.items[] | select(.reason == \"SchemaChanged\" and .type == \"Warning\")] | length > 0' >/dev/null"
    [[ "$(columns_of "${db}_sink" dst)" == "$before" ]] || fail "the sink's columns changed under fail: $(columns_of "${db}_sink" dst)"
    [[ "$(sql "SELECT COUNT(*) FROM ${db}_sink.dst WHERE id > 20")" == 0 ]] || fail "rows written after the change under fail"
    log "fail: Blocked (SchemaChanged), nothing of the change written"

    kubectl -n "$ns" patch dcs "$name" --type merge -p '{"spec":{"sink":{"doris":{"schemaChange":"ignore"}}}}' >/dev/null
    wait_phase "$ns" "$name" Streaming 120
    wait_tables_equal "$db.src" "${db}_sink.dst" 120
    wait_for "status.sink.ignoredColumns lists level" 60 \
        bash -c "kubectl -n $ns get dcs $name -o json | jq -e '.status.sink.ignoredColumns == [\"level\"] and .status.sink.lastSchemaChange.action == \"Ignored\"' >/dev/null"
    [[ "$(columns_of "${db}_sink" dst)" == "$before" ]] || fail "the sink's columns changed under ignore: $(columns_of "${db}_sink" dst)"
    log "ignore: Streaming, the sink's columns kept, level ignored"

    kubectl -n "$ns" patch dcs "$name" --type merge -p '{"spec":{"sink":{"doris":{"schemaChange":"evolve"}}}}' >/dev/null
    sink_has_level() { [[ "$(columns_of "${db}_sink" dst)" == *level* ]]; }
    wait_for "the sink gains level" 120 sink_has_level
    insert_rows "$db.src" 26 27 evolved
    sql "UPDATE $db.src SET level = 7 WHERE id >= 26"
    levels_written() {
        [[ "$(sql "SELECT id, level FROM $db.src WHERE id >= 26 ORDER BY id")" == "$(sql "SELECT id, level FROM ${db}_sink.dst WHERE id >= 26 ORDER BY id")" ]]
    }
    wait_for "level's values of the rows written after in the sink" 120 levels_written
    wait_tables_equal "$db.src" "${db}_sink.dst"
    wait_for "status.sink.lastSchemaChange says level is written from now on" 60 \
        bash -c "kubectl -n $ns get dcs $name -o json | jq -e '.status.sink.lastSchemaChange.action == \"Followed\" and (.status.sink.ignoredColumns == null)' >/dev/null"
    log "evolve: level added to the sink, written from then on"
}
