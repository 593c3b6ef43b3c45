"""The public way to derive and check provably fair rolls from Python (spec/fairness.md).

A stable name for library users and the command line: ``from relay.fairness import verify_fair``. The
check lives in the trust layer (``relay.trust.fairness``), the derivation the room rolls with in the core
(``relay.core.fairness``) and the random source in the rules core (``rules.rng.KeyedDice``); the server
itself imports them from there.
"""

from relay.trust.fairness import (
    AWAITING,
    FAILED,
    FAIR,
    SEALED,
    UNWITNESSED,
    VERDICTS,
    Verdict,
    dice,
    event_transcript,
    fair_map,
    outside_contribution,
    pending_commit,
    roll_key,
    seed_commit,
    sorted_witnesses,
    transcript,
    verify_fair,
)
from rules.rng import KeyedDice

__all__ = [
    "AWAITING",
    "FAILED",
    "FAIR",
    "SEALED",
    "UNWITNESSED",
    "VERDICTS",
    "KeyedDice",
    "Verdict",
    "dice",
    "event_transcript",
    "fair_map",
    "outside_contribution",
    "pending_commit",
    "roll_key",
    "seed_commit",
    "sorted_witnesses",
    "transcript",
    "verify_fair",
]
