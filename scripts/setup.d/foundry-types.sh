#!/usr/bin/env bash
# Installs the TypeScript checker that tests/rules/render/test_foundry_types.py runs: TypeScript and the
# foundry-vtt-types definitions, pinned in tests/foundry_types/package-lock.json, from the npm registry.
# Quiet and idempotent: it does nothing when node_modules already matches the lockfile.
set -euo pipefail
dir="$(cd "$(dirname "$0")/../../tests/foundry_types" && pwd)"

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "foundry-types: installing Node.js and npm from Debian's packages" >&2
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "foundry-types: npm is missing; install Node.js 18 or newer with npm" >&2
  exit 1
fi

cd "$dir"
# npm writes node_modules/.package-lock.json on every install; newer than the lockfile means up to date.
if [ -x node_modules/.bin/tsc ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>npm-ci.log || {
  cat npm-ci.log >&2
  rm -f npm-ci.log
  echo "foundry-types: npm ci failed in $dir" >&2
  exit 1
}
rm -f npm-ci.log
