"""The sans-I/O core: decoded frames in, records to store and frames to send out.

The wire protocol, the room state machine, campaign management, the state folded from a room's log, who
sees what, and the shape of a stored record. No asyncio, sockets, SQLite or NATS (an import-linter contract);
it imports only ``relay.settings`` and ``rules``.
"""
