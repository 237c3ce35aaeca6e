"""The test broker of tests/kafka/broker.sh, from Python.

`Broker(dir)` wraps broker.sh (start, stop, kill, restart); `python3 kafka_broker.py wait-ready
BOOTSTRAP PID TIMEOUT` is broker.sh's readiness check: a metadata request answered by the broker,
through the Python client (librdkafka).
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BROKER_SH = os.path.join(HERE, "broker.sh")


class Broker:
    """One broker whose configuration, data and log live in `dir`."""

    def __init__(self, dir):
        self.dir = os.path.abspath(dir)
        self.bootstrap = None

    def _run(self, *args):
        r = subprocess.run([BROKER_SH, *args], stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"broker.sh {' '.join(args)} exited {r.returncode} (its stderr is above)")
        return r.stdout.strip()

    def start(self, *props):
        """Starts the broker (NAME=VALUE props on the first start only); returns the bootstrap address."""
        self.bootstrap = self._run("start", self.dir, *props)
        return self.bootstrap

    def stop(self):
        self._run("stop", self.dir)

    def kill(self):
        """SIGKILL: the broker dies as in a crash, its data stays."""
        self._run("kill", self.dir)

    def restart(self):
        self.stop()
        return self.start()

    def log_tail(self, lines=60):
        try:
            with open(os.path.join(self.dir, "broker.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_ready(bootstrap, pid, timeout):
    """Until `timeout` seconds: a metadata request to `bootstrap` answered with this one broker.

    Returns False when the process `pid` exits first or the deadline passes.
    """
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    admin = AdminClient({
        "bootstrap.servers": bootstrap,
        "reconnect.backoff.ms": 100,
        "reconnect.backoff.max.ms": 500,
        # Connection refused is expected until the broker listens.
        "log_level": 0,
    })
    last = None
    while time.monotonic() < deadline:
        if not _alive(pid):
            print(f"kafka broker: the JVM (pid {pid}) exited during start-up", file=sys.stderr)
            return False
        try:
            md = admin.list_topics(timeout=max(0.5, min(2.0, deadline - time.monotonic())))
            if md.brokers:
                return True
        except Exception as e:  # KafkaException: not answered yet
            last = e
    print(f"kafka broker: no answer from {bootstrap} within {timeout}s (last error: {last})", file=sys.stderr)
    return False


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "wait-ready":
        sys.exit("usage: kafka_broker.py wait-ready BOOTSTRAP PID TIMEOUT")
    sys.exit(0 if wait_ready(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])) else 1)
