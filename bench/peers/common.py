"""What every peer server shares with the relay: a high descriptor limit and the listening line."""

from __future__ import annotations

import json
import resource
import sys


def raise_nofile() -> int:
    """Raise the soft limit on open descriptors to the hard limit; 10,000 sockets need it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def announce(host: str, port: int, scheme: str) -> None:
    """One JSON line on stderr in the shape the relay logs, so the orchestrator reads every server alike."""
    shown = f"{scheme}://{host}:{port}"
    print(json.dumps({"event": "listening", "host": host, "port": port, "url": shown}), file=sys.stderr)
    sys.stderr.flush()
