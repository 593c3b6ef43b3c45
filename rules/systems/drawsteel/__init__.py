"""Draw Steel (MCDM): power rolls and ability rolls with tier entries.

Importing this package registers ``drawsteel.power`` and ``drawsteel.ability``. The rules themselves
(edges and banes, tiers, automatic outcomes, downgrades) live in ``outcome``; ``tier_entry`` reads an
ability's tier entries; ``inputs`` reads the shared arguments; ``wording`` writes formulas and summaries.
"""

from rules.systems.drawsteel import ability, power

__all__ = ["ability", "power"]
