"""The asyncio shell around the core: sockets, fan-out, keepalive, admission, upkeep of loaded rooms, and
its helpers in ``http`` (the endpoints and served files), ``cluster`` (several nodes on one NATS store) and
``observe`` (metrics, loop lag, allocation traces). Helpers are handed the server as ``host.Host``; they never
import it. Imports every layer below it."""
