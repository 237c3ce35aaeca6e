#!/usr/bin/env bash
# Column schema changes through the mariadb `mysql` command-line client
# (docs/doris-protocols.md §1.9): on a changelog table RENAME COLUMN, MODIFY COLUMN, ORDER BY and
# bloom filter properties fail with Doris's `binlog<row>` error and change nothing, a column comment, ADD COLUMN (with a
# DEFAULT, AFTER a column) and DROP COLUMN work, and an `@incr` window that spans them reads every
# row with the table's current columns; on a table without the changelog RENAME COLUMN keeps the
# values and MODIFY COLUMN widens, refusing a narrowing with Doris's message.
set -uo pipefail
pass=0
fail=0
M=(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch --skip-column-names)

check() { # name expected actual
    if [ "$2" == "$3" ]; then pass=$((pass+1)); else fail=$((fail+1)); printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"; fi
}
refused() { # name expected-message statement
    local out rc
    out=$("${M[@]}" -e "$3" 2>&1); rc=$?
    out=$(tail -n1 <<<"$out") # the client echoes the failed statement first
    if [ $rc -ne 0 ] && [[ "$out" == "ERROR 1105 (HY000) at line 1: errCode = 2, detailMessage = $2" ]]; then
        pass=$((pass+1))
    else
        fail=$((fail+1)); printf 'FAIL %s\n  expected: ERROR 1105 … %s\n  actual:   rc=%s %s\n' "$1" "$2" "$rc" "$out"
    fi
}
binlog='Not allowed to perform current operation on Table With binlog<row>'

out=$("${M[@]}" -e "CREATE DATABASE sc; CREATE TABLE sc.t (id INT NOT NULL, v VARCHAR(8), w INT) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES ('changelog.enable'='true', 'changelog.need_historical_value'='true'); INSERT INTO sc.t VALUES (1,'a',10),(2,'b',20)" 2>&1)
check "ddl and first rows" "" "$out"

refused "rename column on a changelog table" "$binlog" "ALTER TABLE sc.t RENAME COLUMN v vv"
refused "modify column on a changelog table" "$binlog" "ALTER TABLE sc.t MODIFY COLUMN v VARCHAR(32)"
refused "modify column widening an int on a changelog table" "$binlog" "ALTER TABLE sc.t MODIFY COLUMN w BIGINT"
refused "order by on a changelog table" "$binlog" "ALTER TABLE sc.t ORDER BY (id, w, v)"
refused "bloom filter on a changelog table" "$binlog" "ALTER TABLE sc.t SET ('bloom_filter_columns' = 'v')"
out=$("${M[@]}" -e "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.columns WHERE TABLE_SCHEMA='sc' AND TABLE_NAME='t' ORDER BY ORDINAL_POSITION" 2>&1)
check "the refused changes changed nothing" "$(printf 'id\tint\nv\tvarchar(8)\nw\tint')" "$out"

out=$("${M[@]}" -e "ALTER TABLE sc.t MODIFY COLUMN v COMMENT 'the value'; SELECT COLUMN_COMMENT FROM information_schema.columns WHERE TABLE_SCHEMA='sc' AND TABLE_NAME='t' AND COLUMN_NAME='v'" 2>&1)
check "a column comment may change" "the value" "$out"

out=$("${M[@]}" -e "ALTER TABLE sc.t ADD COLUMN n INT DEFAULT '7' AFTER id; UPDATE sc.t SET n = 8, v = 'a2' WHERE id = 1; ALTER TABLE sc.t DROP COLUMN w; INSERT INTO sc.t VALUES (3, 9, 'c')" 2>&1)
check "add with a default and a position, drop" "" "$out"
out=$("${M[@]}" -e "SELECT * FROM sc.t@incr('incrementType'='DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__" 2>&1)
check "a window across the changes: the default in earlier rows, the dropped column in none" \
    "$(printf '1\t7\ta\n2\t7\tb\n1\t7\ta\n1\t8\ta2\n3\t9\tc')" "$out"
out=$("${M[@]}" -e "SELECT __DORIS_BINLOG_OP__ FROM sc.t@incr('incrementType'='DETAIL') ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__" 2>&1)
check "ops of the window" "$(printf '0\n0\n2\n3\n0')" "$out"
out=$("${M[@]}" -e "ALTER TABLE sc.t ADD COLUMN w STRING; SELECT COUNT(*) FROM sc.t@incr('incrementType'='DETAIL') WHERE w IS NOT NULL" 2>&1)
check "a column added again under a dropped one's name has none of its old values" "0" "$out"

refused "a value column first" "Invalid column order. value should be after key. index[t]" "ALTER TABLE sc.t ADD COLUMN f INT FIRST"

out=$("${M[@]}" -e "CREATE TABLE sc.p (id INT NOT NULL, v VARCHAR(4), n INT, d DECIMAL(10,2)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1; INSERT INTO sc.p VALUES (1,'abcd',2147483647,12345678.91); ALTER TABLE sc.p RENAME COLUMN v name; SELECT id, name FROM sc.p" 2>&1)
check "rename keeps the values" "$(printf '1\tabcd')" "$out"
out=$("${M[@]}" -e "ALTER TABLE sc.p MODIFY COLUMN n BIGINT; ALTER TABLE sc.p MODIFY COLUMN name VARCHAR(16); ALTER TABLE sc.p MODIFY COLUMN d DECIMAL(20,2); INSERT INTO sc.p VALUES (2,'longer than four',4294967296,123456789012345678.91); SELECT * FROM sc.p ORDER BY id" 2>&1)
check "widened columns hold larger values" "$(printf '1\tabcd\t2147483647\t12345678.91\n2\tlonger than four\t4294967296\t123456789012345678.91')" "$out"
refused "a narrower integer" "Can not change BIGINT to INT" "ALTER TABLE sc.p MODIFY COLUMN n INT"
refused "a shorter varchar" "Cannot shorten string length" "ALTER TABLE sc.p MODIFY COLUMN name VARCHAR(8)"
refused "nullable to not null" "Can not change from nullable to non-nullable" "ALTER TABLE sc.p MODIFY COLUMN n BIGINT NOT NULL"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
