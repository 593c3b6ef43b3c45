"""The game systems. Importing this package registers every resolver in ``rules.registry.SYSTEMS``."""

from rules.systems import daggerheart, dice, drawsteel, faces, honors_edge, nexus

__all__ = ["daggerheart", "dice", "drawsteel", "faces", "honors_edge", "nexus"]
