#!/usr/bin/env bash
# Installs the Roll20 bridge's locked build and test packages (esbuild; dice-roller-parser, the independent
# Roll20-syntax parser its tests read chat lines with) when they are missing or older than the lock file.
# The bridge itself is built by the tests (tests/roll20/conftest.py), never checked in. Idempotent and quiet.
set -euo pipefail
cd "$(dirname "$0")/../../clients/roll20"
if ! command -v npm >/dev/null 2>&1; then
  echo "roll20: npm is not installed (needed to build and test the Roll20 bridge)" >&2
  exit 1
fi
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi
