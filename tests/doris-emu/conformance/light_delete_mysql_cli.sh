#!/usr/bin/env bash
# `enable_mow_light_delete` through the mariadb `mysql` command-line client (docs/doris-protocols.md
# §1.1): set at CREATE TABLE and by ALTER TABLE on a merge-on-write table, shown by SHOW CREATE
# TABLE and information_schema.table_properties, refused on other models; while it is true a
# DELETE statement removes rows but records nothing in the changelog.
set -uo pipefail
pass=0
fail=0
M=(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch --skip-column-names)

check() { # name expected actual
    if [ "$2" == "$3" ]; then pass=$((pass+1)); else fail=$((fail+1)); printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"; fi
}
prop() { # table
    "${M[@]}" -e "SELECT PROPERTY_VALUE FROM information_schema.table_properties WHERE TABLE_SCHEMA='ld' AND TABLE_NAME='$1' AND PROPERTY_NAME='enable_mow_light_delete'" 2>&1
}

out=$("${M[@]}" -e "CREATE DATABASE ld; CREATE TABLE ld.t (id INT NOT NULL, v VARCHAR(8)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES ('changelog.enable'='true', 'enable_mow_light_delete'='true'); CREATE TABLE ld.plain (id INT NOT NULL) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1" 2>&1)
check "ddl" "" "$out"
check "set at create" "true" "$(prop t)"
check "shown false by default on merge-on-write" "false" "$(prop plain)"
out=$("${M[@]}" -e "SHOW CREATE TABLE ld.t" 2>&1)
case "$out" in
    *'"enable_mow_light_delete" = "true"'*) pass=$((pass+1)) ;;
    *) fail=$((fail+1)); echo "FAIL show create table lacks the property: $out" ;;
esac

out=$("${M[@]}" -e "INSERT INTO ld.t VALUES (1,'a'),(2,'b'); DELETE FROM ld.t WHERE id = 1; ALTER TABLE ld.t SET ('enable_mow_light_delete' = 'false'); DELETE FROM ld.t WHERE id = 2; SELECT COUNT(*) FROM ld.t" 2>&1)
check "both deletes remove their rows" "0" "$out"
check "altered" "false" "$(prop t)"
out=$("${M[@]}" -e "SELECT id, __DORIS_BINLOG_OP__ FROM ld.t@incr('incrementType'='DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__" 2>&1)
check "only the delete made after the ALTER is in the changelog" "$(printf '1\t0\n2\t0\n2\t1')" "$out"

out=$("${M[@]}" -e "CREATE TABLE ld.d (id INT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES ('enable_mow_light_delete'='true')" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"enable_mow_light_delete property is only supported for unique merge-on-write table"* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL light delete on DUPLICATE KEY: rc=$rc $out"; fi
out=$("${M[@]}" -e "ALTER TABLE ld.t SET ('enable_mow_light_delete' = 'yes')" 2>&1); rc=$?
if [ $rc -ne 0 ] && [[ "$out" == *"Property enable_mow_light_delete should be set to true or false"* ]]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL a value that is no boolean: rc=$rc $out"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
