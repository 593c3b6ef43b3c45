"""Prometheus metrics for one server instance (its own registry, so tests can run several in a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


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
