"""Renderings of results for the tables' own tools: Foundry VTT, Roll20 and plain text.

- ``to_foundry(result)``: Foundry ``Roll`` data (``Roll#toJSON``) for ``Roll.fromData``.
- ``to_foundry_message(result, visibility, gm_ids, roller_id)``: ChatMessage creation data.
- ``to_roll20(result)``: ``{"rollresult": <Roll20 roll-result JSON>, "chat": <a chat line>}``.
- ``to_text(result)``: the one-line summary.

See docs/renderers.md.
"""

from rules.render.foundry import to_foundry, to_foundry_message
from rules.render.roll20 import to_roll20
from rules.render.text import to_text

__all__ = ["to_foundry", "to_foundry_message", "to_roll20", "to_text"]
