#!/usr/bin/env bash
# The mariadb `mysql` command-line client against the emulator's query port: connect, DDL, DML,
# SELECT, SHOW CREATE TABLE, SHOW FRONTENDS, information_schema, CREATE TABLE LIKE and REPLACE WITH
# TABLE, and errors.
set -uo pipefail
pass=0
fail=0
M=(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch --skip-column-names)

check() { # name expected actual
    if [ "$2" == "$3" ]; then pass=$((pass+1)); else fail=$((fail+1)); printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"; fi
}

out=$("${M[@]}" -e "CREATE DATABASE cli; CREATE TABLE cli.t (id INT NOT NULL, name VARCHAR(20), score DECIMAL(5,2)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num'='1', 'changelog.enable'='true')" 2>&1)
check "ddl" "" "$out"

out=$(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root -vvv -e "INSERT INTO cli.t VALUES (1,'a',1.5),(2,NULL,2),(1,'a2',3.25)" 2>&1)
check "insert reports affected rows" "Query OK, 3 rows affected" "$(grep -o 'Query OK, [0-9]* rows affected' <<<"$out")"

out=$("${M[@]}" -e "SELECT id, name, score FROM cli.t ORDER BY id" 2>&1)
check "select upserted rows" "$(printf '1\ta2\t3.25\n2\tNULL\t2.00')" "$out"

out=$("${M[@]}" -D cli -e "SELECT COUNT(*) FROM t" 2>&1)
check "count with -D" "2" "$out"

out=$("${M[@]}" -e "UPDATE cli.t SET score = 9.5 WHERE id = 2; DELETE FROM cli.t WHERE id = 1; SELECT id, score FROM cli.t" 2>&1)
check "update and delete" "$(printf '2\t9.50')" "$out"

out=$("${M[@]}" -e "SHOW CREATE TABLE cli.t" 2>&1)
case "$out" in
    *'"changelog.enable" = "true"'*) pass=$((pass+1)) ;;
    *) fail=$((fail+1)); echo "FAIL show create table lacks the changelog property: $out" ;;
esac

out=$(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch -e "SHOW FRONTENDS" 2>&1)
col=$(head -n1 <<<"$out" | tr '\t' '\n' | grep -n '^ArrowFlightSqlPort$' | cut -d: -f1)
if [ -n "$col" ]; then
    check "frontends flight port" "$EMU_FE_FLIGHT_PORT" "$(sed -n 2p <<<"$out" | cut -f"$col")"
else
    fail=$((fail+1)); echo "FAIL SHOW FRONTENDS has no ArrowFlightSqlPort column: $out"
fi

out=$("${M[@]}" -e "SELECT PROPERTY_VALUE FROM information_schema.table_properties WHERE TABLE_SCHEMA='cli' AND TABLE_NAME='t' AND PROPERTY_NAME='changelog.enable'" 2>&1)
check "table_properties" "true" "$out"

# The atomic overwrite the Doris docs describe: CREATE TABLE LIKE, load, REPLACE WITH TABLE.
out=$("${M[@]}" -e "CREATE TABLE cli.t_new LIKE cli.t; INSERT INTO cli.t_new VALUES (7,'seven',7.7); ALTER TABLE cli.t REPLACE WITH TABLE t_new PROPERTIES ('swap' = 'false'); SELECT id, name, score FROM cli.t" 2>&1)
check "replace with table" "$(printf '7\tseven\t7.70')" "$out"
out=$("${M[@]}" -e "SHOW TABLES FROM cli" 2>&1)
check "the replacement is gone by its old name" "t" "$out"
out=$("${M[@]}" -e "SHOW CREATE TABLE cli.t" 2>&1)
case "$out" in
    *'"changelog.enable" = "true"'*) pass=$((pass+1)) ;;
    *) fail=$((fail+1)); echo "FAIL the replaced table lost the copied changelog property: $out" ;;
esac
out=$("${M[@]}" -e "ALTER TABLE cli.t REPLACE WITH TABLE nope PROPERTIES ('swap' = 'false')" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"Unknown table 'nope'"* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL replace with a missing table: rc=$rc $out"; fi

out=$("${M[@]}" -e "SELECT * FROM cli.nope" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *ERROR*nope* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL unknown table: rc=$rc $out"; fi

out=$("${M[@]}" -e "THIS IS NOT SQL" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *ERROR* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL bad sql: rc=$rc $out"; fi

out=$(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root -pwrong -e "SELECT 1" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"Authenticate failed"* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL wrong password: rc=$rc $out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
