#!/usr/bin/env bash
# Install the PostgreSQL server binaries (initdb, pg_ctl) if they are absent, and print their directory.
#
# The tests start their own throwaway cluster from these binaries (tests/support/fixtures/postgres.py): no service is started
# here. Under CI (CI=true) the PostgreSQL tests fail when the binaries are missing, so run this before the test suite.
# Needs root (apt-get) only when the binaries are missing; PostgreSQL itself is later run as the `postgres` user.
set -euo pipefail

find_bin() {
    if [[ -n "${DPONE_PG_BIN:-}" && -x "${DPONE_PG_BIN}/initdb" && -x "${DPONE_PG_BIN}/pg_ctl" ]]; then
        echo "${DPONE_PG_BIN}"; return 0
    fi
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v initdb)")"; return 0
    fi
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
    if [[ -n "${dir}" && -x "${dir}/initdb" && -x "${dir}/pg_ctl" ]]; then
        echo "${dir}"; return 0
    fi
    return 1
}

if ! bindir="$(find_bin)"; then
    if [[ "$(id -u)" -ne 0 ]]; then
        echo "PostgreSQL binaries not found and not root: install the 'postgresql' package" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    # Debian's package starts a cluster service where a service manager exists; the tests do not use it.
    bindir="$(find_bin)"
fi
id postgres >/dev/null 2>&1 || { echo "user 'postgres' missing (the package creates it)" >&2; exit 1; }
echo "${bindir}"
