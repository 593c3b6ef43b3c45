#!/usr/bin/env bash
# Caddy validates deploy/Caddyfile and is the real reverse proxy in the browser test of a relay published
# under a path (tests/browser/test_behind_a_proxy.py). Installs Debian's caddy only when it is missing; the
# package's own service is stopped where systemd started it (the tests run caddy themselves, on loopback
# ports).
set -euo pipefail
if [ ! -x /usr/bin/caddy ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq caddy >/dev/null
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet caddy 2>/dev/null; then
    systemctl disable --now caddy >/dev/null 2>&1 || true
  fi
fi
