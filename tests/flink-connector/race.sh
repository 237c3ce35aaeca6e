#!/usr/bin/env bash
# The race against the peer (BENCHMARKS.md): dcs-runner and Flink + the Doris connector, one after
# the other in one run, on the same doris-emu build, table and change stream. Not part of the test
# command: at its full shape a side takes 3-5 minutes (BENCHMARKS.md).
# Arguments are passed to the driver: the sides to run (dcs, flink-default, flink-small; all by
# default). RACE_ROWS, RACE_SECONDS, RACE_RATE and RACE_FLINK_SMALL_HEAP change the shape
# (tests/race/src/main.rs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
cargo build --release --quiet -p dcs-runner -p dcs-race --bins
(cd "$here" && mvn -B -q -T 1 compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt)
cp="$here/target/classes:$(cat "$here/target/classpath.txt")"
exec "$root/target/release/dcs-race" "$root/target/release/dcs-runner" "$cp" "$@"
