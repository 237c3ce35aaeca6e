"""pyarrow Flight and ADBC Flight SQL against an emulator serving TLS (run.sh starts it with
--tls-self-signed): grpc+tls:// with the test CA as tls_root_certs, locations that say grpc+tls://
and serve over TLS, then the refusals: a wrong CA and a plaintext grpc:// client."""
import os
import sys

import adbc_driver_flightsql
import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow.flight as fl

HOST = os.environ["EMU_HOST"]
FE_PORT = int(os.environ["EMU_FE_FLIGHT_PORT"])
BE_PORT = int(os.environ["EMU_BE_FLIGHT_PORT"])
USER = os.environ.get("EMU_USER", "root")
PASSWORD = os.environ.get("EMU_PASSWORD", "")
with open(os.environ["EMU_TLS_CA"], "rb") as f:
    CA = f.read()
with open(os.environ["EMU_WRONG_CA"], "rb") as f:
    WRONG_CA = f.read()

passed = 0
failed = 0


def check(name, expected, actual):
    global passed, failed
    if expected == actual:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}\n  expected: {expected!r}\n  actual:   {actual!r}")


def fails(name, f, *errors):
    """f() must raise one of errors (the message is printed when it does not). A failed TLS
    handshake reaches pyarrow as UNAVAILABLE, or as INTERNAL ("Could not finish writing before
    closing") when it happens under the Handshake stream."""
    try:
        f()
    except errors:
        check(name, True, True)
        return
    except Exception as e:  # noqa: BLE001 - reported as a failure
        check(name, "one of " + ", ".join(e.__name__ for e in errors), f"{type(e).__name__}: {e}")
        return
    check(name, "an error", "it worked")


check("emulator says tls", "true", os.environ.get("EMU_TLS"))


# --- pyarrow: a Flight SQL statement packed by hand (Any{CommandStatementQuery{query}})
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


def statement_query(sql):
    inner = length_delimited(1, sql.encode())
    type_url = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
    return length_delimited(1, type_url) + length_delimited(2, inner)


def uri_of(location):
    uri = location.uri
    return uri.decode() if isinstance(uri, bytes) else uri


fe = fl.FlightClient(f"grpc+tls://{HOST}:{FE_PORT}", tls_root_certs=CA)
auth = fe.authenticate_basic_token(USER, PASSWORD)
check("pyarrow: bearer token over TLS", True, auth[1].startswith(b"Bearer "))
opts = fl.FlightCallOptions(headers=[auth])


def flight_info(sql):
    return fe.get_flight_info(fl.FlightDescriptor.for_command(statement_query(sql)), opts)


def fetch(info, on_fe):
    ep = info.endpoints[0]
    client = fl.FlightClient(uri_of(ep.locations[0]), tls_root_certs=CA)
    try:
        return client.do_get(ep.ticket, opts if on_fe else fl.FlightCallOptions()).read_all()
    finally:
        client.close()


info = flight_info("CREATE DATABASE IF NOT EXISTS tls_flight")
check("pyarrow: FE-local location says grpc+tls", f"grpc+tls://{HOST}:{FE_PORT}", uri_of(info.endpoints[0].locations[0]))
check("pyarrow: DDL result over TLS", {"StatusResult": ["0"]}, fetch(info, True).to_pydict())
for sql in ["CREATE TABLE IF NOT EXISTS tls_flight.t (id INT NOT NULL, name VARCHAR(16)) UNIQUE KEY(id) "
            "DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num'='1')",
            "INSERT INTO tls_flight.t VALUES (1, 'a'), (2, 'b'), (3, 'c')"]:
    fetch(flight_info(sql), True)
info = flight_info("SELECT id, name FROM tls_flight.t ORDER BY id")
check("pyarrow: query location is the BE over TLS", f"grpc+tls://{HOST}:{BE_PORT}", uri_of(info.endpoints[0].locations[0]))
check("pyarrow: rows from the BE over TLS", {"id": [1, 2, 3], "name": ["a", "b", "c"]}, fetch(info, False).to_pydict())

# refusals
fails("pyarrow: a wrong CA is refused",
      lambda: fl.FlightClient(f"grpc+tls://{HOST}:{FE_PORT}", tls_root_certs=WRONG_CA)
      .authenticate_basic_token(USER, PASSWORD),
      fl.FlightUnavailableError, fl.FlightInternalError)
fails("pyarrow: a wrong CA is refused by the BE",
      lambda: fl.FlightClient(f"grpc+tls://{HOST}:{BE_PORT}", tls_root_certs=WRONG_CA)
      .do_get(info.endpoints[0].ticket).read_all(),
      fl.FlightUnavailableError)
fails("pyarrow: plaintext grpc:// gets nothing",
      lambda: fl.FlightClient(f"grpc://{HOST}:{FE_PORT}").authenticate_basic_token(USER, PASSWORD),
      fl.FlightUnavailableError, fl.FlightInternalError)
fe.close()


# --- ADBC Flight SQL (the driver the Flink connector uses)
def adbc(ca):
    return flight_sql.connect(
        f"grpc+tls://{HOST}:{FE_PORT}",
        db_kwargs={
            "username": USER,
            "password": PASSWORD,
            adbc_driver_flightsql.DatabaseOptions.TLS_ROOT_CERTS.value: ca.decode(),
        },
        autocommit=True,
    )


with adbc(CA) as conn, conn.cursor() as cur:
    cur.execute("SELECT id, name FROM tls_flight.t ORDER BY id")
    check("adbc: rows over TLS (FE and BE)", [(1, "a"), (2, "b"), (3, "c")], cur.fetchall())
    cur.execute("SHOW DATABASES")
    check("adbc: FE-local result over TLS", True, ("tls_flight",) in cur.fetchall())


def adbc_query(ca):
    with adbc(ca) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchall()


fails("adbc: a wrong CA is refused", lambda: adbc_query(WRONG_CA), flight_sql.Error)


def adbc_plain():
    with flight_sql.connect(f"grpc://{HOST}:{FE_PORT}",
                            db_kwargs={"username": USER, "password": PASSWORD}, autocommit=True) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT 1")
        cur.fetchall()


fails("adbc: plaintext grpc:// gets nothing", adbc_plain, flight_sql.Error)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
