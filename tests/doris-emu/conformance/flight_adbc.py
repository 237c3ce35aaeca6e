"""ADBC Flight SQL (the driver the Flink connector and Doris docs use) against the emulator's FE
Flight SQL port: DDL, INSERT, SELECT with Doris types, @incr with hidden columns, errors."""
import datetime
import decimal
import json
import os
import sys
import urllib.request

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa

HOST = os.environ["EMU_HOST"]
FE_PORT = int(os.environ["EMU_FE_FLIGHT_PORT"])
HTTP_PORT = os.environ.get("EMU_FE_HTTP_PORT")
USER = os.environ.get("EMU_USER", "root")
PASSWORD = os.environ.get("EMU_PASSWORD", "")

passed = 0
failed = 0


def check(name, expected, actual):
    global passed, failed
    if expected == actual:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}\n  expected: {expected!r}\n  actual:   {actual!r}")


def connect(password=PASSWORD):
    return flight_sql.connect(f"grpc://{HOST}:{FE_PORT}",
                              db_kwargs={"username": USER, "password": password}, autocommit=True)


def put_faults(**kw):
    faults = {"stream_load": None, "http_delay_ms": 0, "flight_cut_after_batches": None,
              "incr_error": None, "refuse_connections": False}
    faults.update(kw)
    req = urllib.request.Request(f"http://{HOST}:{HTTP_PORT}/_emu/faults", data=json.dumps(faults).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()


try:
    bad = connect(PASSWORD + "wrong")
    bad.cursor().execute("SELECT 1")
    check("bad password refused", True, False)
except flight_sql.Error as e:
    check("bad password message", True, "Unable to authenticate user" in str(e))

conn = connect()
cur = conn.cursor()

cur.execute("CREATE DATABASE IF NOT EXISTS adbcdb")
check("DDL result", [("0",)], cur.fetchall())
cur.execute("DROP TABLE IF EXISTS adbcdb.t")
cur.fetchall()
cur.execute("""CREATE TABLE adbcdb.t (
    id BIGINT NOT NULL, name VARCHAR(32), amount DECIMAL(12, 3), born DATE, seen DATETIME(6), flag BOOLEAN,
    small SMALLINT, f FLOAT
) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 3
PROPERTIES ("replication_num" = "1", "changelog.enable" = "true", "changelog.need_historical_value" = "true")""")
cur.fetchall()
cur.execute("""INSERT INTO adbcdb.t VALUES
    (1, 'ann', 10.500, '2001-02-03', '2024-01-02 03:04:05.123456', true, 7, 1.5),
    (2, 'o''brien', NULL, NULL, NULL, false, NULL, NULL),
    (3, 'cy', -0.001, '1969-12-31', '1969-12-31 23:59:59', NULL, -1, 0)""")
cur.fetchall()

cur.execute("SELECT id, name, amount, born, seen, flag, small, f FROM adbcdb.t ORDER BY id")
rows = cur.fetchall()
check("row 1", (1, "ann", decimal.Decimal("10.500"), datetime.date(2001, 2, 3),
                datetime.datetime(2024, 1, 2, 3, 4, 5, 123456), True, 7, 1.5), rows[0])
check("row 2", (2, "o'brien", None, None, None, False, None, None), rows[1])
check("row 3", (3, "cy", decimal.Decimal("-0.001"), datetime.date(1969, 12, 31),
                datetime.datetime(1969, 12, 31, 23, 59, 59), None, -1, 0.0), rows[2])

cur.execute("SELECT id, amount, seen, small, f FROM adbcdb.t ORDER BY id")
schema = cur.fetch_arrow_table().schema
check("arrow types", [pa.int64(), pa.decimal128(12, 3), pa.timestamp("us"), pa.int16(), pa.float32()],
      [f.type for f in schema])
check("NOT NULL key", False, schema.field("id").nullable)

# Session state persists on the connection's token.
cur.execute("USE adbcdb")
cur.fetchall()
cur.execute("SELECT id FROM t ORDER BY id")
check("USE then unqualified table", [(1,), (2,), (3,)], cur.fetchall())

# @incr as the Flink connector sends it.
cur.execute("DELETE FROM adbcdb.t WHERE id = 3")
cur.fetchall()
cur.execute("/* ApplicationName=Flink ArrowFlightSQL Query */ SELECT `id`, `name`, __DORIS_BINLOG_TSO__, "
            "__DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ FROM `adbcdb`.`t`@incr('incrementType' = 'DETAIL') "
            "ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__")
t = cur.fetch_arrow_table()
check("incr columns", ["id", "name", "__DORIS_BINLOG_TSO__", "__DORIS_BINLOG_LSN__", "__DORIS_BINLOG_OP__"],
      t.schema.names)
check("incr op type", pa.int8(), t.schema.field("__DORIS_BINLOG_OP__").type)
check("incr ops", [0, 0, 0, 1], t.column("__DORIS_BINLOG_OP__").to_pylist())
check("incr delete carries the old row", "cy", t.column("name").to_pylist()[-1])
tsos = t.column("__DORIS_BINLOG_TSO__").to_pylist()
check("tso ordered", sorted(tsos), tsos)
cur.execute("SELECT * FROM adbcdb.t@incr('incrementType' = 'APPEND_ONLY')")
t = cur.fetch_arrow_table()
check("SELECT * omits hidden columns", False, any(n.startswith("__DORIS_") for n in t.schema.names))

# Metadata calls (GetSqlInfo, GetTables with schema, GetDbSchemas).
check("vendor name", "DorisFE", conn.adbc_get_info().get("vendor_name"))
ts = conn.adbc_get_table_schema("t", db_schema_filter="adbcdb")
check("table schema types", [pa.int64(), pa.string(), pa.decimal128(12, 3), pa.date32(), pa.timestamp("us")],
      [f.type for f in ts][:5])
objs = conn.adbc_get_objects(depth="tables", catalog_filter="internal", db_schema_filter="adbcdb").read_all()
tables = [t["table_name"] for c in objs.to_pylist() for s in c["catalog_db_schemas"] for t in s["db_schema_tables"]]
check("get_objects finds the table", ["t"], tables)

# Errors.
try:
    cur.execute("SELECT * FROM adbcdb.missing")
    check("unknown table fails", True, False)
except flight_sql.Error as e:
    check("unknown table message", True, "get flight info statement failed" in str(e))

if HTTP_PORT:
    put_faults(incr_error={"code": 5101, "count": 1})
    try:
        cur.execute("SELECT * FROM adbcdb.t@incr('incrementType' = 'DETAIL')")
        check("5101 raised", True, False)
    except flight_sql.Error as e:
        check("5101 message", True, "ERR_INCR_VISIBLE_WAIT_TIMEOUT" in str(e))
        details = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
                   for k, v in (getattr(e, "details", None) or [])}
        check("5101 gRPC metadata", ("5101", "ERR_INCR_VISIBLE_WAIT_TIMEOUT"),
              (details.get("doris-error-code"), details.get("doris-error-name")))
    cur.execute("SELECT * FROM adbcdb.t@incr('incrementType' = 'DETAIL')")
    check("retry after 5101 succeeds", 4, len(cur.fetchall()))


# A snapshot read as of a commit TSO, tablet by tablet, as dcs reads one for a changelog-mode
# sink: `FROM t FOR VERSION AS OF <tso> TABLET(...)` (Doris's baseTableRef: the snapshot clause
# before the tablet list) returns the rows committed up to that TSO, whatever changed since.
cur.execute("DROP TABLE IF EXISTS adbcdb.tt")
cur.fetchall()
cur.execute("""CREATE TABLE adbcdb.tt (id INT NOT NULL, v VARCHAR(8)) UNIQUE KEY(id)
DISTRIBUTED BY HASH(id) BUCKETS 2
PROPERTIES ("replication_num" = "1", "changelog.enable" = "true", "changelog.need_historical_value" = "true")""")
cur.fetchall()
cur.execute("INSERT INTO adbcdb.tt VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')")
cur.fetchall()
cur.execute("SELECT MAX(__DORIS_BINLOG_TSO__) FROM adbcdb.tt@incr('incrementType' = 'DETAIL')")
t0 = cur.fetchall()[0][0]
cur.execute("UPDATE adbcdb.tt SET v = 'A' WHERE id = 1")
cur.fetchall()
cur.execute("DELETE FROM adbcdb.tt WHERE id = 2")
cur.fetchall()
cur.execute("INSERT INTO adbcdb.tt VALUES (5, 'e')")
cur.fetchall()
req = urllib.request.Request(f"http://{HOST}:{HTTP_PORT}/api/adbcdb/tt/_query_plan",
                             data=json.dumps({"sql": "select id, v from adbcdb.tt"}).encode(),
                             headers={"Content-Type": "application/json",
                                      "Authorization": "Basic " + __import__("base64").b64encode(
                                          f"{USER}:{PASSWORD}".encode()).decode()})
tablets = sorted(int(k) for k in json.load(urllib.request.urlopen(req))["data"]["partitions"])
check("two tablets planned", 2, len(tablets))
as_of = []
for tablet in tablets:
    cur.execute(f"SELECT id, v FROM adbcdb.tt FOR VERSION AS OF {t0} TABLET({tablet})")
    as_of += cur.fetchall()
check("as of T0, tablet by tablet", [(1, "a"), (2, "b"), (3, "c"), (4, "d")], sorted(as_of))
now = []
for tablet in tablets:
    cur.execute(f"SELECT id, v FROM adbcdb.tt TABLET({tablet})")
    now += cur.fetchall()
check("now, tablet by tablet", [(1, "A"), (3, "c"), (4, "d"), (5, "e")], sorted(now))

cur.close()
conn.close()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
