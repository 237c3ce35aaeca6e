"""pymysql against the emulator: column schema changes on a changelog table and on a plain one
(docs/doris-protocols.md §1.9) — Doris's error number and text for what it refuses, and the typed
rows an `@incr` window returns across ADD/DROP COLUMN."""
import decimal
import os
import sys

import pymysql

passed = 0
failed = 0
BINLOG = "errCode = 2, detailMessage = Not allowed to perform current operation on Table With binlog<row>"


def check(name, expected, actual):
    global passed, failed
    if expected == actual:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}\n  expected: {expected!r}\n  actual:   {actual!r}")


def refused(name, message, sql):
    try:
        cur.execute(sql)
        check(name, "an error", "success")
    except pymysql.err.MySQLError as e:
        check(name, (1105, message), (e.args[0], e.args[1]))


conn = pymysql.connect(host=os.environ["EMU_HOST"], port=int(os.environ["EMU_QUERY_PORT"]),
                       user="root", password="", autocommit=True)
cur = conn.cursor()
cur.execute("CREATE DATABASE scp")
cur.execute("""CREATE TABLE scp.t (id BIGINT NOT NULL, amount DECIMAL(10,2), note VARCHAR(16))
UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2
PROPERTIES ("binlog.enable" = "true", "binlog.format" = "ROW", "binlog.need_historical_value" = "true")""")
cur.executemany("INSERT INTO scp.t VALUES (%s, %s, %s)", [(1, decimal.Decimal("1.50"), "one"), (2, None, "two")])

refused("rename", BINLOG, "ALTER TABLE scp.t RENAME COLUMN note remark")
refused("widen a decimal", BINLOG, "ALTER TABLE scp.t MODIFY COLUMN amount DECIMAL(20,2)")
refused("move a column", BINLOG, "ALTER TABLE scp.t MODIFY COLUMN note VARCHAR(16) AFTER id")

cur.execute("ALTER TABLE scp.t ADD COLUMN level INT DEFAULT '3' AFTER amount")
cur.execute("UPDATE scp.t SET level = %s WHERE id = %s", (4, 2))
cur.execute("ALTER TABLE scp.t DROP COLUMN note")
cur.execute("SELECT id, amount, level, __DORIS_BINLOG_OP__ FROM scp.t@incr('incrementType'='DETAIL') "
            "ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__")
check("the window's rows carry the added column's default before it, the dropped column in none", (
    (1, decimal.Decimal("1.50"), 3, 0),
    (2, None, 3, 0),
    (2, None, 3, 2),
    (2, None, 4, 3),
), cur.fetchall())
check("the window's columns are the table's", ["id", "amount", "level"],
      [d[0] for d in cur.description][:3])
cur.execute("SELECT * FROM scp.t@incr('incrementType'='DETAIL') LIMIT 1")
check("SELECT * of the window", ["id", "amount", "level"], [d[0] for d in cur.description])

cur.execute("CREATE TABLE scp.p (id BIGINT NOT NULL, n SMALLINT, f FLOAT) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1")
cur.execute("INSERT INTO scp.p VALUES (%s, %s, %s)", (1, 32767, 1.5))
cur.execute("ALTER TABLE scp.p RENAME COLUMN n small")
cur.execute("ALTER TABLE scp.p MODIFY COLUMN small INT")
cur.execute("ALTER TABLE scp.p MODIFY COLUMN f DOUBLE")
cur.execute("INSERT INTO scp.p VALUES (%s, %s, %s)", (2, 2147483647, 2.25))
cur.execute("SELECT id, small, f FROM scp.p ORDER BY id")
check("renamed and widened, the values kept", ((1, 32767, 1.5), (2, 2147483647, 2.25)), cur.fetchall())
cur.execute("SELECT DATA_TYPE FROM information_schema.columns WHERE TABLE_SCHEMA='scp' AND TABLE_NAME='p' ORDER BY ORDINAL_POSITION")
check("the new types", (("bigint",), ("int",), ("double",)), cur.fetchall())
refused("a narrowing", "errCode = 2, detailMessage = Can not change INT to SMALLINT", "ALTER TABLE scp.p MODIFY COLUMN small SMALLINT")
refused("to another kind", "errCode = 2, detailMessage = Can not change DOUBLE to INT", "ALTER TABLE scp.p MODIFY COLUMN f INT")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
