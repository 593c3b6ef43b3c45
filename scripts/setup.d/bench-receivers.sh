#!/usr/bin/env bash
# Installs the benchmark harness's locked Node dependencies (bench/receivers: msgpack, ws, socket.io-client)
# when they are missing or older than the lock file: the hosted test (tests/e2e/lifecycle/test_hosted.py)
# runs that harness. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/../../bench/receivers"
if ! command -v npm >/dev/null 2>&1; then
  echo "bench-receivers: npm is not installed (needed for the hosted test's client harness)" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
