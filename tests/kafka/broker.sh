#!/usr/bin/env bash
# A one-node Apache Kafka broker for tests: KRaft, broker and controller in one JVM, listening on
# 127.0.0.1 only, its configuration, data and log in one directory. Needs tests/kafka/install.sh
# to have run, and the Python client confluent-kafka (the readiness check).
#
#   broker.sh start [DIR] [NAME=VALUE ...]  start (formatting DIR on first use); prints the
#                                           bootstrap address on stdout once a client is served
#   broker.sh stop DIR                      SIGTERM, then wait for the JVM to exit
#   broker.sh kill DIR                      SIGKILL (a crash), then wait for the JVM to be gone
#   broker.sh restart DIR                   stop, then start on the same data and ports
#   broker.sh bootstrap DIR                 print the bootstrap address
#
# The first start of a DIR picks two free ports (client and controller listeners), writes
# DIR/server.properties (NAME=VALUE arguments are appended to it, overriding the defaults) and
# formats DIR/data with kafka.tools.StorageTool (random cluster id, --standalone). Later starts
# reuse them, so a restart keeps the data and the address. Without DIR a fresh directory is made
# under $TMPDIR and named on stderr. The JVM's output goes to DIR/broker.log, its pid to
# DIR/broker.pid. A broker that does not serve a client within KAFKA_START_TIMEOUT seconds
# (default 180) is killed and the tail of its log printed; exit 1.
# Environment: KAFKA_HEAP_OPTS (default -Xms128m -Xmx512m), KAFKA_JVM_OPTS (added after the
# JVM's options: -XX:TieredStopAtLevel=4 brings back the C2 compiler), KAFKA_START_TIMEOUT, KAFKA_STOP_TIMEOUT (default 120), PYTHON (default python3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib="$here/target/lib"
PY=${PYTHON:-python3}
start_timeout=${KAFKA_START_TIMEOUT:-180}
stop_timeout=${KAFKA_STOP_TIMEOUT:-120}

die() {
    echo "kafka broker: $*" >&2
    exit 1
}

# The broker's pid if DIR's broker is running: the pid file names a live (not zombie) process
# whose command line is this DIR's broker (never another process that reused the pid).
running_pid() {
    local dir=$1 pid state
    [ -f "$dir/broker.pid" ] || return 1
    pid=$(cat "$dir/broker.pid")
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ "$state" != Z ] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "kafka.Kafka $dir/server.properties" || return 1
    echo "$pid"
}

# Waits until pid is gone (or a zombie), at most $2 seconds; returns 1 on time-out.
wait_gone() {
    local pid=$1 deadline=$((SECONDS + $2)) state
    while [ -r "/proc/$pid/stat" ]; do
        state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || break
        [ "$state" = Z ] && break
        [ $SECONDS -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

prop() { # file name
    sed -n "s/^$2=//p" "$1" | tail -n1
}

bootstrap_of() {
    local dir=$1
    [ -f "$dir/server.properties" ] || die "$dir has no server.properties (never started)"
    prop "$dir/server.properties" advertised.listeners | sed 's|^PLAINTEXT://||'
}

# Two free TCP ports on 127.0.0.1 below the kernel's ephemeral range, so that no outgoing
# connection is handed one of them between a kill and a restart.
free_ports() {
    "$PY" - <<'PYEOF'
import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = []
for _ in range(1000):
    p = random.randrange(10000, max(lo, 10002))
    if p in ports:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        ports.append(p)
    except OSError:
        continue
    finally:
        s.close()
    if len(ports) == 2:
        break
if len(ports) < 2:
    raise SystemExit("no free port found")
print(*ports)
PYEOF
}

configure() { # dir [NAME=VALUE ...]
    local dir=$1
    shift
    local ports bport cport cluster_id kv
    for kv in "$@"; do
        [[ $kv == ?*=* ]] || die "not NAME=VALUE: $kv"
    done
    ports=$(free_ports) || die "could not find free ports"
    read -r bport cport <<<"$ports"
    mkdir -p "$dir/data"
    {
        echo "# A one-node test broker (tests/kafka/broker.sh)."
        echo "process.roles=broker,controller"
        echo "node.id=1"
        echo "controller.quorum.bootstrap.servers=127.0.0.1:$cport"
        echo "listeners=PLAINTEXT://127.0.0.1:$bport,CONTROLLER://127.0.0.1:$cport"
        echo "advertised.listeners=PLAINTEXT://127.0.0.1:$bport"
        echo "controller.listener.names=CONTROLLER"
        echo "inter.broker.listener.name=PLAINTEXT"
        echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        echo "log.dirs=$dir/data"
        echo "num.partitions=1"
        echo "default.replication.factor=1"
        echo "min.insync.replicas=1"
        echo "offsets.topic.replication.factor=1"
        echo "offsets.topic.num.partitions=1"
        echo "transaction.state.log.replication.factor=1"
        echo "transaction.state.log.min.isr=1"
        echo "transaction.state.log.num.partitions=1"
        echo "share.coordinator.state.topic.replication.factor=1"
        echo "share.coordinator.state.topic.min.isr=1"
        echo "group.initial.rebalance.delay.ms=0"
        # A broker restarted after SIGKILL registers again once the controller has let the
        # session of its previous incarnation expire (default 9 s, heartbeats every 2 s).
        echo "broker.heartbeat.interval.ms=1000"
        echo "broker.session.timeout.ms=4000"
        for kv in "$@"; do
            echo "$kv"
        done
    } >"$dir/server.properties"
    # A random Kafka UUID (URL-safe base64 of 16 bytes). Like Kafka's own Uuid.randomUuid, never
    # one that starts with "-": the storage tool would read it as an option (1 id in 64).
    cluster_id=$("$PY" -c '
import base64, uuid
while True:
    id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not id.startswith("-"):
        print(id)
        break
')
    # shellcheck disable=SC2086
    if ! java ${KAFKA_HEAP_OPTS:--Xms64m -Xmx256m} -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$here/log4j2.properties" \
        -cp "$lib/*" kafka.tools.StorageTool format --standalone --cluster-id "$cluster_id" \
        --config "$dir/server.properties" >"$dir/format.log" 2>&1; then
        cat "$dir/format.log" >&2
        rm -f "$dir/server.properties"
        die "formatting the storage of $dir failed (output above)"
    fi
}

start() {
    local dir=${1:-}
    [ $# -gt 0 ] && shift
    compgen -G "$lib/kafka_2.13-*.jar" >/dev/null || die "no broker jars in $lib: run tests/kafka/install.sh"
    if [ -z "$dir" ]; then
        dir=$(mktemp -d "${TMPDIR:-/tmp}/kafka-broker.XXXXXX")
        echo "kafka broker: directory $dir" >&2
    fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if pid=$(running_pid "$dir"); then
        die "the broker of $dir is already running (pid $pid)"
    fi
    if [ ! -f "$dir/server.properties" ]; then
        configure "$dir" "$@"
    elif [ $# -gt 0 ]; then
        die "$dir is already configured; NAME=VALUE arguments apply to the first start only"
    fi
    local bootstrap t0=$SECONDS pid
    bootstrap=$(bootstrap_of "$dir")
    echo "=== start $(date -u +%FT%TZ)" >>"$dir/broker.log"
    # shellcheck disable=SC2086
    # C1 only (TieredStopAtLevel=1): starts 1-2 s sooner on two loaded cores; a test broker
    # moves little data. KAFKA_JVM_OPTS comes later on the command line and can undo it.
    java ${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.configurationFile="$here/log4j2.properties" \
        ${KAFKA_JVM_OPTS:-} -cp "$lib/*" kafka.Kafka "$dir/server.properties" \
        </dev/null >>"$dir/broker.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/broker.pid"
    if ! "$PY" "$here/kafka_broker.py" wait-ready "$bootstrap" "$pid" "$start_timeout"; then
        echo "kafka broker: the broker of $dir did not start; the end of $dir/broker.log:" >&2
        tail -n 60 "$dir/broker.log" >&2
        if [ -r "/proc/$pid/stat" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            wait_gone "$pid" 30 || true
        fi
        rm -f "$dir/broker.pid"
        exit 1
    fi
    echo "kafka broker: $bootstrap serving (pid $pid, $((SECONDS - t0)) s)" >&2
    echo "$bootstrap"
}

stop() {
    local dir pid
    dir=$(cd "${1:?usage: broker.sh stop DIR}" && pwd)
    if ! pid=$(running_pid "$dir"); then
        rm -f "$dir/broker.pid"
        return 0
    fi
    kill -TERM "$pid"
    if ! wait_gone "$pid" "$stop_timeout"; then
        kill -KILL "$pid" 2>/dev/null || true
        wait_gone "$pid" 30 || true
        rm -f "$dir/broker.pid"
        die "the broker of $dir did not exit within ${stop_timeout}s of SIGTERM; killed it (SIGKILL)"
    fi
    rm -f "$dir/broker.pid"
}

kill_broker() {
    local dir pid
    dir=$(cd "${1:?usage: broker.sh kill DIR}" && pwd)
    pid=$(running_pid "$dir") || die "the broker of $dir is not running"
    kill -KILL "$pid"
    wait_gone "$pid" 60 || die "the broker of $dir (pid $pid) is still there 60s after SIGKILL"
    rm -f "$dir/broker.pid"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
start) start "$@" ;;
stop) stop "$@" ;;
kill) kill_broker "$@" ;;
restart)
    stop "$@"
    start "$1"
    ;;
bootstrap) bootstrap_of "$(cd "${1:?usage: broker.sh bootstrap DIR}" && pwd)" ;;
*)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
