"""pyarrow.flight against the emulator's Flight ports, the way a Doris client does it by hand:
Basic -> Bearer auth, a hand-packed Flight SQL CommandStatementQuery, endpoints followed to their
location (BE without credentials, FE-local results on the FE), Arrow types per Doris 5.0."""
import base64
import datetime
import decimal
import json
import os
import sys
import urllib.request

import pyarrow as pa
import pyarrow.flight as fl

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


# --- protobuf by hand: Any{type_url=1, value=2} around CommandStatementQuery{query=1} ---------
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def length_delimited(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def read_varint(buf, i):
    shift = n = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def fields(buf):
    """Length-delimited fields of a protobuf message: {field number: bytes}."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        if key & 7 != 2:
            raise ValueError("unexpected wire type")
        n, i = read_varint(buf, i)
        out[key >> 3] = buf[i:i + n]
        i += n
    return out


def statement_query(sql):
    inner = length_delimited(1, sql.encode())
    type_url = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
    return length_delimited(1, type_url) + length_delimited(2, inner)


def ticket_handle(ticket_bytes):
    """TicketStatementQuery.statement_handle out of the Any-packed ticket."""
    any_fields = fields(ticket_bytes)
    check("ticket type", b"type.googleapis.com/arrow.flight.protocol.sql.TicketStatementQuery", any_fields[1])
    return fields(any_fields[2])[1].decode()


# --- a Doris-style Flight SQL client ----------------------------------------------------------
fe = fl.FlightClient(f"grpc://{HOST}:{FE_PORT}")
auth = fe.authenticate_basic_token(USER, PASSWORD)
check("bearer header name", b"authorization", auth[0])
check("bearer header value", True, auth[1].startswith(b"Bearer "))
opts = fl.FlightCallOptions(headers=[auth])


def flight_info(sql, options=opts):
    return fe.get_flight_info(fl.FlightDescriptor.for_command(statement_query(sql)), options)


def location_of(info):
    uri = info.endpoints[0].locations[0].uri
    return uri.decode() if isinstance(uri, bytes) else uri


def fetch(info):
    """Read every endpoint at its location; the BE gets no credentials."""
    tables = []
    for ep in info.endpoints:
        uri = ep.locations[0].uri
        uri = uri.decode() if isinstance(uri, bytes) else uri
        client = fl.FlightClient(uri)
        on_fe = uri.endswith(f":{FE_PORT}")
        tables.append(client.do_get(ep.ticket, opts if on_fe else fl.FlightCallOptions()).read_all())
        client.close()
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def run(sql):
    return fetch(flight_info(sql))


# auth failures
try:
    fl.FlightClient(f"grpc://{HOST}:{FE_PORT}").authenticate_basic_token(USER, PASSWORD + "wrong")
    check("bad password refused", True, False)
except fl.FlightUnauthenticatedError as e:
    check("bad password message", True, "Unable to authenticate user" in str(e))

try:
    flight_info("SELECT 1", fl.FlightCallOptions(headers=[(b"authorization", b"Bearer bogus")]))
    check("bogus token refused", True, False)
except fl.FlightUnauthenticatedError as e:
    check("bogus token message", True, "invalid bearer token: bogus" in str(e))

# DDL and DML are FE-local: StatusResult 0 from the FE itself.
info = flight_info("CREATE DATABASE IF NOT EXISTS pyflight")
check("DDL endpoint on the FE", f"grpc+tcp://{HOST}:{FE_PORT}", location_of(info))
check("DDL handle is peer:queryId", True, ":" in ticket_handle(info.endpoints[0].ticket.ticket))
t = fetch(info)
check("DDL result", {"StatusResult": ["0"]}, t.to_pydict())
run("DROP TABLE IF EXISTS pyflight.t")
run("""CREATE TABLE pyflight.t (
    id INT NOT NULL, name VARCHAR(32), big LARGEINT, score DECIMAL(10, 2), born DATE,
    seen DATETIME(3), at0 DATETIME, ok BOOLEAN, ratio DOUBLE, doc JSON
) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2
PROPERTIES ("replication_num" = "1", "changelog.enable" = "true", "changelog.need_historical_value" = "true")""")
run("""INSERT INTO pyflight.t VALUES
    (1, 'ann', 170141183460469231731687303715884105727, 12.50, '2001-02-03', '2024-01-02 03:04:05.123',
     '2024-01-02 03:04:05', true, 0.25, '{"a": [1, 2]}'),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)""")

# A query: one endpoint at the BE, Doris's ticket handle, the BE schema.
sql = "SELECT * FROM pyflight.t ORDER BY id"
info = flight_info(sql)
check("one endpoint", 1, len(info.endpoints))
be_location = location_of(info)
check("query endpoint on the BE", True,
      be_location.startswith(f"grpc+tcp://{HOST}:") and not be_location.endswith(f":{FE_PORT}"))
handle = ticket_handle(info.endpoints[0].ticket.ticket)
parts = handle.split("&")
check("handle has 4 parts", 4, len(parts))
check("handle sql", sql, base64.b64decode(parts[3]).decode())
check("total_records", -1, info.total_records)
t = fetch(info)
expected_schema = pa.schema([
    pa.field("id", pa.int32(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("big", pa.string()),
    pa.field("score", pa.decimal128(10, 2)),
    pa.field("born", pa.date32()),
    pa.field("seen", pa.timestamp("ms")),
    pa.field("at0", pa.timestamp("s")),
    pa.field("ok", pa.bool_()),
    pa.field("ratio", pa.float64()),
    pa.field("doc", pa.string()),
])
check("schema", expected_schema.to_string(), t.schema.to_string())
check("FlightInfo schema equals DoGet schema", True, info.schema.equals(t.schema))
rows = t.to_pylist()
check("row 1", {
    "id": 1, "name": "ann", "big": "170141183460469231731687303715884105727", "score": decimal.Decimal("12.50"),
    "born": datetime.date(2001, 2, 3), "seen": datetime.datetime(2024, 1, 2, 3, 4, 5, 123000),
    "at0": datetime.datetime(2024, 1, 2, 3, 4, 5), "ok": True, "ratio": 0.25,
}, {k: v for k, v in rows[0].items() if k != "doc"})
check("json text", {"a": [1, 2]}, json.loads(rows[0]["doc"]))
check("NULL row", [2] + [None] * 9, list(rows[1].values()))

# A BE result can be fetched once.
try:
    fl.FlightClient(be_location).do_get(info.endpoints[0].ticket).read_all()
    check("second DoGet fails", True, False)
except fl.FlightError as e:
    check("second DoGet fails", True, "not found arrow flight schema" in str(e))

# Session state lives on the token.
run("USE pyflight")
check("USE then unqualified name", [1, 2], run("SELECT id FROM t ORDER BY id").column("id").to_pylist())

# @incr with the hidden columns named, as the Flink connector asks.
run("UPDATE pyflight.t SET name = 'bob' WHERE id = 1")
t = run("SELECT `id`, `name`, __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__ "
        "FROM `pyflight`.`t`@incr('incrementType' = 'DETAIL') "
        "ORDER BY __DORIS_BINLOG_TSO__, __DORIS_BINLOG_LSN__, __DORIS_BINLOG_OP__")
check("incr hidden column types", [pa.int64(), pa.int64(), pa.int8()],
      [t.schema.field(n).type for n in ("__DORIS_BINLOG_TSO__", "__DORIS_BINLOG_LSN__", "__DORIS_BINLOG_OP__")])
check("incr ops", [0, 0, 2, 3], t.column("__DORIS_BINLOG_OP__").to_pylist())
check("incr names", ["ann", None, "ann", "bob"], t.column("name").to_pylist())
t = run("SELECT * FROM pyflight.t@incr('incrementType' = 'DETAIL')")
check("SELECT * omits hidden columns", False, any(n.startswith("__DORIS_") for n in t.schema.names))

# Errors: INTERNAL with Doris's prefix; the @incr window errors are UNAVAILABLE.
try:
    flight_info("SELECT * FROM pyflight.missing")
    check("unknown table fails", True, False)
except fl.FlightInternalError as e:
    check("unknown table message", True, "get flight info statement failed" in str(e))

if HTTP_PORT:
    faults = {"stream_load": None, "http_delay_ms": 0, "flight_cut_after_batches": None,
              "incr_error": {"code": 5101, "count": 1}, "refuse_connections": False}
    req = urllib.request.Request(f"http://{HOST}:{HTTP_PORT}/_emu/faults", data=json.dumps(faults).encode(),
                                 method="PUT", headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
    try:
        flight_info("SELECT * FROM pyflight.t@incr('incrementType' = 'DETAIL')")
        check("5101 raised", True, False)
    except fl.FlightUnavailableError as e:
        check("5101 message", True, "ERR_INCR_VISIBLE_WAIT_TIMEOUT" in str(e))

fe.close()
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
