#!/usr/bin/env bash
# The Flink Doris connector suite: builds the dcs-doris-emu binary, then runs the Maven tests
# (the connector in a Flink MiniCluster, one JVM) against emulators it starts on free ports.
# Maven downloads Flink and the connector from Maven Central into ~/.m2 on the first run.
# Surefire prints "Tests run: N, Failures: N, ..."; exits non-zero on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2} cargo build --quiet -p dcs-doris-emu --bin dcs-doris-emu
cd "$here"
exec mvn -B -T 1 --no-transfer-progress -Dstyle.color=never test \
    -DdorisEmu.bin="$root/target/debug/dcs-doris-emu" "$@"
