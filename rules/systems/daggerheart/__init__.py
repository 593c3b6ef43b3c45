"""Daggerheart: the players' Duality roll and the adversaries' attack roll.

Importing this package registers ``daggerheart.duality`` and ``daggerheart.attack``.
"""

from rules.systems.daggerheart import attack, duality

__all__ = ["attack", "duality"]
