"""Nexus RPG: skill tests and dice checks.

Importing this package registers ``nexus.test`` and ``nexus.check``.
"""

from rules.systems.nexus import checks, skill_test

__all__ = ["checks", "skill_test"]
