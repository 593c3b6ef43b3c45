#!/usr/bin/env bash
# Installs the JS client's locked dependencies (msgpack; ws and esbuild for its tests) when they are missing
# or older than the lock file. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/../../clients/js"
if ! command -v npm >/dev/null 2>&1; then
  echo "js-client: npm is not installed (needed for the JS client tests)" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
