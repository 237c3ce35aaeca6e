#!/usr/bin/env bash
# Tablets that move (docs/doris-protocols.md §2.4), with curl and the mariadb `mysql` client:
# `_query_plan` lists a table's tablets; TRUNCATE TABLE gives it new ones (the old ids are never
# listed again); `SELECT … TABLET(old id)` reads no rows and no error; the new tablets hold the
# rows written since.
set -uo pipefail
pass=0
fail=0
M=(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch --skip-column-names)

check() { # name expected actual
    if [ "$2" == "$3" ]; then pass=$((pass+1)); else fail=$((fail+1)); printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"; fi
}

tablets() { # the sorted tablet ids of tm.t in its query plan, comma-separated
    curl -s -u root: -H 'Content-Type: application/json' \
        -d '{"sql": "select id, v from tm.t"}' "http://$FE/api/tm/t/_query_plan" |
        jq -r '.data.partitions | keys | map(tonumber) | sort | map(tostring) | join(",")'
}

out=$("${M[@]}" -e "CREATE DATABASE tm; CREATE TABLE tm.t (id INT NOT NULL, v VARCHAR(8)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 4 PROPERTIES ('replication_num'='1', 'changelog.enable'='true'); INSERT INTO tm.t VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e')" 2>&1)
check "ddl and rows" "" "$out"

before=$(tablets)
check "four tablets planned" "4" "$(tr ',' '\n' <<<"$before" | grep -c .)"
out=$("${M[@]}" -e "SELECT COUNT(*) FROM tm.t TABLET($before)" 2>&1)
check "the tablets hold the rows" "5" "$out"

out=$("${M[@]}" -e "TRUNCATE TABLE tm.t; INSERT INTO tm.t VALUES (9,'z')" 2>&1)
check "truncate and a new row" "" "$out"
after=$(tablets)
check "four tablets after the truncate" "4" "$(tr ',' '\n' <<<"$after" | grep -c .)"
common=$(comm -12 <(tr ',' '\n' <<<"$before" | sort) <(tr ',' '\n' <<<"$after" | sort) | grep -c .)
check "no old tablet id is planned again" "0" "$common"

out=$("${M[@]}" -e "SELECT COUNT(*) FROM tm.t TABLET($before)" 2>&1); rc=$?
check "the old tablet ids read as no rows, without an error" "0 0" "$rc $out"
out=$("${M[@]}" -e "SELECT id, v FROM tm.t TABLET($after)" 2>&1)
check "the new tablets hold the rows written since" "$(printf '9\tz')" "$out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
