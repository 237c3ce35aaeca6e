#!/usr/bin/env bash
# curl against the emulator's FE HTTP port exactly as the Doris docs use it: Stream Load with
# --location-trusted through the FE's 307, a duplicate label, and 2PC commit / abort. The table is
# created through the statement API (no MySQL client needed).
# Needs FE=host:port (FE HTTP); prints "N passed, M failed" and exits non-zero on any mismatch.
set -uo pipefail
: "${FE:?set FE=host:port of the FE HTTP port}"
pass=0
fail=0
run=$(date +%s%N)
DB=${DB:-curl_conf}
TBL=t_$run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name expected actual
    if [ "$2" == "$3" ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        printf 'FAIL %s\n  expected: %s\n  actual:   %s\n' "$1" "$2" "$3"
    fi
}

stmt() { # db sql -> response body
    curl -sS -u root: -H "Content-Type: application/json" \
        -d "$(jq -cn --arg s "$2" '{stmt: $s}')" "http://$FE/api/query/default_cluster/$1"
}

count_rows() {
    stmt "$DB" "SELECT COUNT(*) FROM $DB.$TBL" | jq -r '.data.data[0][0]'
}

# --- set-up over the statement API
out=$(stmt information_schema "CREATE DATABASE IF NOT EXISTS $DB")
check "create database" "0" "$(jq -r .code <<<"$out")"
out=$(stmt "$DB" "CREATE TABLE $DB.$TBL (id INT NOT NULL, name VARCHAR(32), score DECIMAL(10,2)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num'='1')")
check "create table" "0 exec_status" "$(jq -r '"\(.code) \(.data.type)"' <<<"$out")"

printf '1,alice,10.50\n2,bob,\\N\n3,carol,7\n' >"$tmp/data.csv"
printf '4,dave,1\n' >"$tmp/more.csv"
printf '5,erin,2\n' >"$tmp/abort.csv"

# --- a plain load
L1="curl_${run}_1"
out=$(curl -sS --location-trusted -u root: -H "Expect:100-continue" -H "label:$L1" \
    -H "column_separator:," -T "$tmp/data.csv" "http://$FE/api/$DB/$TBL/_stream_load")
check "load status" "Success" "$(jq -r .Status <<<"$out")"
check "load label" "$L1" "$(jq -r .Label <<<"$out")"
check "load rows" "3 3 0" "$(jq -r '"\(.NumberTotalRows) \(.NumberLoadedRows) \(.NumberFilteredRows)"' <<<"$out")"
check "load message" "OK" "$(jq -r .Message <<<"$out")"
check "rows visible" "3" "$(count_rows)"

# --- the same label again
out=$(curl -sS --location-trusted -u root: -H "Expect:100-continue" -H "label:$L1" \
    -H "column_separator:," -T "$tmp/data.csv" "http://$FE/api/$DB/$TBL/_stream_load")
check "duplicate label status" "Label Already Exists" "$(jq -r .Status <<<"$out")"
check "duplicate label job" "FINISHED" "$(jq -r .ExistingJobStatus <<<"$out")"
case "$(jq -r .Message <<<"$out")" in
    "errCode = 2, detailMessage = Label [$L1] has already been used, relate to txn ["*"]") pass=$((pass + 1)) ;;
    *) fail=$((fail + 1)); echo "FAIL duplicate label message: $out" ;;
esac

# --- no Expect header (curl adds one to uploads by itself; `-H "Expect:"` removes it): the FE
# refuses before redirecting
out=$(curl -sS --location-trusted -u root: -H "Expect:" -H "label:${L1}_x" -H "column_separator:," \
    -T "$tmp/data.csv" "http://$FE/api/$DB/$TBL/_stream_load")
check "missing expect" '{"status":"FAILED","msg":"There is no 100-continue header"}' "$out"

# --- 2PC: pre-commit, then commit by txn id
L2="curl_${run}_2"
out=$(curl -sS --location-trusted -u root: -H "Expect:100-continue" -H "label:$L2" \
    -H "column_separator:," -H "two_phase_commit:true" -T "$tmp/more.csv" \
    "http://$FE/api/$DB/$TBL/_stream_load")
check "2pc load status" "Success" "$(jq -r .Status <<<"$out")"
check "2pc flag" "true" "$(jq -r .TwoPhaseCommit <<<"$out")"
txn=$(jq -r .TxnId <<<"$out")
check "pre-committed rows invisible" "3" "$(count_rows)"
out=$(curl -sS -X PUT --location-trusted -u root: -H "txn_id:$txn" -H "txn_operation:commit" \
    "http://$FE/api/$DB/_stream_load_2pc")
check "2pc commit" "Success|transaction [$txn] commit successfully." "$(jq -r '"\(.status)|\(.msg)"' <<<"$out")"
check "committed rows visible" "4" "$(count_rows)"

# --- 2PC: pre-commit, then abort by label; the label is free again
L3="curl_${run}_3"
out=$(curl -sS --location-trusted -u root: -H "Expect:100-continue" -H "label:$L3" \
    -H "column_separator:," -H "two_phase_commit:true" -T "$tmp/abort.csv" \
    "http://$FE/api/$DB/$TBL/_stream_load")
check "2pc load (to abort)" "Success" "$(jq -r .Status <<<"$out")"
out=$(curl -sS -X PUT --location-trusted -u root: -H "label:$L3" -H "txn_operation:abort" \
    "http://$FE/api/$DB/_stream_load_2pc")
check "2pc abort" "Success|label [$L3] abort successfully." "$(jq -r '"\(.status)|\(.msg)"' <<<"$out")"
check "aborted rows invisible" "4" "$(count_rows)"
out=$(curl -sS -X PUT --location-trusted -u root: -H "txn_id:$txn" -H "txn_operation:rollback" \
    "http://$FE/api/$DB/_stream_load_2pc")
check "2pc bad operation" "Fail|transaction operation should be 'commit' or 'abort'" "$(jq -r '"\(.status)|\(.msg)"' <<<"$out")"
out=$(curl -sS -X PUT --location-trusted -u root: -H "txn_operation:commit" "http://$FE/api/$DB/_stream_load_2pc")
check "2pc no txn" '{"status":"FAILED","msg":"No transaction id or label selected."}' "$out"
out=$(curl -sS --location-trusted -u root: -H "Expect:100-continue" -H "label:$L3" \
    -H "column_separator:," -T "$tmp/abort.csv" "http://$FE/api/$DB/$TBL/_stream_load")
check "label reusable after abort" "Success" "$(jq -r .Status <<<"$out")"
check "final rows" "5" "$(count_rows)"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
