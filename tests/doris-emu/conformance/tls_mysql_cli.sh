#!/usr/bin/env bash
# The mariadb `mysql` client against an emulator serving TLS: the SSL upgrade with --ssl-ca and
# --ssl-verify-server-cert, statements over it, then the refusals: a wrong CA, and a client that
# will not upgrade (error 3159).
# Needs EMU_HOST, EMU_QUERY_PORT, EMU_TLS_CA and EMU_WRONG_CA; prints "N passed, M failed".
set -uo pipefail
: "${EMU_TLS_CA:?set EMU_TLS_CA to the CA that signed the emulator certificate}"
: "${EMU_WRONG_CA:?set EMU_WRONG_CA to a CA that did not}"
pass=0
fail=0
base=(mysql -h "$EMU_HOST" -P "$EMU_QUERY_PORT" -u root --batch --skip-column-names)
M=("${base[@]}" --ssl --ssl-ca="$EMU_TLS_CA" --ssl-verify-server-cert)

check() { # name expected actual
    if [ "$2" == "$3" ]; then pass=$((pass+1)); else fail=$((fail+1)); printf 'FAIL %s\n  expected: %q\n  actual:   %q\n' "$1" "$2" "$3"; fi
}

check "emulator says tls" "true" "${EMU_TLS:-}"

out=$("${M[@]}" -e "SELECT 1" 2>&1)
check "select over TLS" "1" "$out"

out=$("${M[@]}" -e "CREATE DATABASE tls_cli; CREATE TABLE tls_cli.t (id INT NOT NULL, name VARCHAR(20)) UNIQUE KEY(id) DISTRIBUTED BY HASH(id) BUCKETS 2 PROPERTIES ('replication_num'='1')" 2>&1)
check "ddl over TLS" "" "$out"
out=$("${M[@]}" -e "INSERT INTO tls_cli.t VALUES (1,'a'),(2,'b'); SELECT id, name FROM tls_cli.t ORDER BY id" 2>&1)
check "insert and select over TLS" "$(printf '1\ta\n2\tb')" "$out"

# The client reports the cipher it negotiated (the `status` command's SSL line).
out=$("${M[@]}" -e "status" 2>&1 | grep -E '^SSL:')
case "$out" in
    *"Cipher in use is "*) check "status shows a cipher" ok ok ;;
    *) check "status shows a cipher" "SSL: Cipher in use is …" "$out" ;;
esac

# --- refusals
out=$("${base[@]}" --ssl --ssl-ca="$EMU_WRONG_CA" --ssl-verify-server-cert -e "SELECT 1" 2>&1)
rc=$?
check "wrong CA fails" "1" "$rc"
case "$out" in
    *ERROR\ 2026*) check "wrong CA: SSL connection error (2026)" ok ok ;;
    *) check "wrong CA: SSL connection error (2026)" "ERROR 2026 …" "$out" ;;
esac

out=$("${base[@]}" --skip-ssl -e "SELECT 1" 2>&1)
check "a client that will not upgrade is refused with 3159" \
    "ERROR 3159 (HY000): Connections using insecure transport are prohibited while --require_secure_transport=ON." "$out"

out=$("${M[@]}" -e "SELECT 2" 2>&1)
check "the port serves TLS after the refusals" "2" "$out"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
