"""pymysql against the emulator's query port: DDL, parameterised DML, typed results, errors."""
import datetime
import decimal
import os
import sys

import pymysql

passed = 0
failed = 0


def check(name, expected, actual):
    global passed, failed
    if expected == actual:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}\n  expected: {expected!r}\n  actual:   {actual!r}")


conn = pymysql.connect(host=os.environ["EMU_HOST"], port=int(os.environ["EMU_QUERY_PORT"]),
                       user="root", password="", autocommit=True)
cur = conn.cursor()
cur.execute("CREATE DATABASE py")
cur.execute("""CREATE TABLE py.t (
    id BIGINT NOT NULL, name VARCHAR(32), amount DECIMAL(10,2), born DATE, seen DATETIME(3), ok BOOLEAN
) DUPLICATE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 1 PROPERTIES ("replication_num" = "1")""")
n = cur.executemany("INSERT INTO py.t VALUES (%s, %s, %s, %s, %s, %s)", [
    (1, "ann", decimal.Decimal("10.50"), datetime.date(2001, 2, 3), datetime.datetime(2024, 1, 2, 3, 4, 5, 123000), True),
    (2, "o'brien", None, None, None, False),
])
check("rows inserted", 2, n)
cur.execute("SELECT id, name, amount, born, seen, ok FROM py.t ORDER BY id")
rows = cur.fetchall()
check("typed row 1", (1, "ann", decimal.Decimal("10.50"), datetime.date(2001, 2, 3),
                      datetime.datetime(2024, 1, 2, 3, 4, 5, 123000), 1), rows[0])
check("quoted string and NULLs", (2, "o'brien", None, None, None, 0), rows[1])
cur.execute("SELECT COUNT(*) FROM py.t WHERE id >= %s", (2,))
check("count with parameter", (2 - 1,), cur.fetchone())

try:
    cur.execute("SELECT * FROM py.missing")
    check("unknown table raises", True, False)
except pymysql.err.MySQLError as e:
    check("unknown table mentions it", True, "missing" in str(e))

try:
    pymysql.connect(host=os.environ["EMU_HOST"], port=int(os.environ["EMU_QUERY_PORT"]), user="root", password="bad")
    check("bad password refused", True, False)
except pymysql.err.OperationalError as e:
    # opensrv-mysql answers a failed handshake with 1698 (Doris: 1045); see README.
    check("bad password refused", 1698, e.args[0])

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
