"""A room's fixed facts: its id, name, epoch, creation time and its Fear and Hope caps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RoomInfo:
    id: str
    name: str
    epoch: str  # a random id made when the room is created; a new epoch means the log was lost
    created: int  # ms since the Unix epoch
    fear_max: int
    hope_max: int

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "room": self.id,
            "name": self.name,
            "epoch": self.epoch,
            "created": self.created,
            "fear_max": self.fear_max,
            "hope_max": self.hope_max,
        }
