"""Prometheus metrics for one server instance (its own registry, so tests can run several in a process), and
whether the store has room (``Fullness``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from relay.settings.logs import get_logger

CONTENT_TYPE = CONTENT_TYPE_LATEST
logger = get_logger("relay.server")


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Label children cached: ``labels()`` costs more than the increment, twice per stored event.
        self._events: dict[str, Counter] = {}
        self._rolls: dict[tuple[str, str], Counter] = {}
        self.connections = Gauge(
            "tablerelay_connections",
            "Open WebSocket connections that completed their hello.",
            registry=self.registry,
        )
        self.rooms = Gauge("tablerelay_rooms", "Rooms loaded in memory.", registry=self.registry)
        self.events = Counter(
            "tablerelay_events", "Events stored, by kind.", ["kind"], registry=self.registry
        )
        self.rolls = Counter(
            "tablerelay_rolls",
            "Rolls stored, by rules system and visibility.",
            ["system", "visibility"],
            registry=self.registry,
        )
        self.errors = Counter(
            "tablerelay_errors", "Error frames sent, by code.", ["code"], registry=self.registry
        )
        self.closes = Counter(
            "tablerelay_closes", "Sockets the server closed, by close code.", ["code"], registry=self.registry
        )
        self.fanout = Histogram(
            "tablerelay_fanout_latency_seconds",
            "Time from a request's arrival to its events being committed and handed to fan-out.",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self.loop_lag = Histogram(
            "tablerelay_event_loop_lag_seconds",
            "How late the event loop ran a timer due every 100 ms: the wait every socket shares.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self.batch = Histogram(
            "tablerelay_append_batch_size",
            "Appends committed per SQLite transaction.",
            buckets=(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000),
            registry=self.registry,
        )

        # Witnessed rolls (spec/fairness.md).
        self.witness_wait = Histogram(
            "tablerelay_witness_wait_seconds",
            "Time from a witnessed roll's pending event to its roll (all witnesses in, or the wait over).",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.witness_late = Counter(
            "tablerelay_witness_late",
            "Witness values that came after their roll was made (refused; the roll is made without them).",
            registry=self.registry,
        )
        self.witness_missing = Counter(
            "tablerelay_witness_missing",
            "Witnesses asked for a roll whose value was not in it when it was made (never answered in time).",
            registry=self.registry,
        )

    def measure(self, name: str, value: float) -> None:
        """A figure the room reported (``relay.core.actions.Measure``)."""
        if name == "witness_wait_seconds":
            self.witness_wait.observe(value)
        elif name == "witness_late":
            self.witness_late.inc(value)
        elif name == "witness_missing":
            self.witness_missing.inc(value)

    def event(self, kind: str) -> None:
        child = self._events.get(kind)
        if child is None:
            child = self._events[kind] = self.events.labels(kind)
        child.inc()

    def roll(self, system: str, visibility: str) -> None:
        key = (system, visibility)
        child = self._rolls.get(key)
        if child is None:
            child = self._rolls[key] = self.rolls.labels(system, visibility)
        child.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


#: Appends stored in a row, after a refusal, that end a full-store episode.
SETTLED = 100


class Fullness:
    """Whether the store has room, as the appends' outcomes tell (``relay.storage.base.StoreFull``).

    ``/healthz`` reads ``full``: the last append was refused for want of space. The log says ``store_full``
    once when that starts and ``store_writable`` once when an append is stored again, never once per refused
    roll: near a stream's byte limit small appends may fit while larger ones do not, and the store then goes
    from full to not full and back with every roll. Only ``SETTLED`` appends stored in a row end the
    episode, so that a later refusal is said again.
    """

    def __init__(self) -> None:
        self.full = False
        self.episode = False  # a refusal was said and the episode has not settled yet
        self._back = False  # ``store_writable`` was said in this episode
        self._stored = 0  # appends stored since the episode's last refusal

    def refused(self, error: BaseException, room: str) -> None:
        """An append to ``room`` was refused for want of space."""
        self.full = True
        self._stored = 0
        if self.episode:
            return
        self.episode = True
        self._back = False
        logger.error(
            "store_full",
            room=room,
            error=str(error),
            hint="rolls and spends are refused until there is space again; they resume by themselves",
        )

    def stored(self, room: str, seq: int) -> None:
        """An append was stored during an episode (the caller asks only while ``episode``)."""
        self.full = False
        if not self._back:
            self._back = True
            logger.info("store_writable", room=room, seq=seq)
        self._stored += 1
        if self._stored >= SETTLED:
            self.episode = False
