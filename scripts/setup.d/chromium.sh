#!/usr/bin/env bash
# The browser tests drive the system Chromium through Playwright (browser downloads are not possible here,
# so `playwright install` is never used). Installs Chromium from apt only when it is missing.
set -euo pipefail
if [ ! -x /usr/bin/chromium ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
fi
