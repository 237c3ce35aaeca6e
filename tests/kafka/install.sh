#!/usr/bin/env bash
# Puts the Apache Kafka broker (the version pinned in pom.xml) with its runtime dependencies into
# tests/kafka/target/lib, from Maven Central through Maven (~/.m2 caches the downloads).
# Idempotent: a stamp holding pom.xml's checksum makes it return at once when the jars are there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib="$here/target/lib"
stamp="$lib/.installed"
want=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
    exit 0
fi
for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "kafka install: $tool is not installed (.ci/setup installs Java 17 and Maven)" >&2
        exit 2
    fi
done
echo "kafka install: fetching the broker jars (tests/kafka/pom.xml) into $lib"
rm -rf "$lib"
mvn -B --no-transfer-progress -q -Dstyle.color=never -f "$here/pom.xml" package
if ! compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
    echo "kafka install: mvn finished but $lib has no kafka_2.13 jar" >&2
    exit 1
fi
echo "$want" >"$stamp"
echo "kafka install: $(find "$lib" -name "*.jar" | wc -l) jars in $lib"
