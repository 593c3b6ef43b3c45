"""tablerelay's benchmark suite: the relay against a bare websockets server and python-socketio.

Run it with ``./scripts/bench`` (or ``python -m bench``); see docs/benchmarks.md for the method.
"""
