"""A dice seed abandoned unrevealed (docs/fairness.md, "Where this differs", (7)): the next seed's commit
while it is open, as a relay writes when it imports a room without the open seed's secret. Both verifiers
(``relay.trust.fairness`` and the spec-only tests/spec_fairness.py) keep its rolls "awaiting seed" for good,
never failed, judge the rolls after it on the next seed as usual, and fail a roll that uses it afterwards."""

from __future__ import annotations

from relay.trust import fairness as fair
from tests.relay.trust.test_fairness import ANA, BO, GM, Log, contribution, dice_roll


def abandoned_log() -> tuple[Log, dict[str, int]]:
    """Seed 1 serves two rolls and is abandoned by seed 2's commit; seed 2 serves two and is revealed."""
    log = Log()
    log.commit()
    at = {"before": log.roll(ANA, dice_roll("2d6x"), seed=contribution("ana 1"))["seq"]}
    at["gm before"] = log.roll(GM, dice_roll("1d20"))["seq"]
    log.commit()  # seed 2, with seed 1 still open
    at["commit"] = log.events[-1]["seq"]
    at["after"] = log.roll(BO, dice_roll("4d6kh3"), seed=contribution("bo 1"))["seq"]
    p = log.pending(GM, dice_roll("1d20 + 1d4"), asked=["ana"])
    at["gm after"] = log.roll(GM, dice_roll("1d20 + 1d4"), pending=p, witnesses={"ana": contribution("a")})[
        "seq"
    ]
    log.reveal(2)
    return log, at


def test_an_abandoned_seeds_rolls_await_it_and_the_next_seeds_verify() -> None:
    log, at = abandoned_log()
    verdicts = log.verdicts()  # the spec-only verifier agrees, roll by roll
    assert {name: verdicts.get(seq) for name, seq in at.items()} == {
        "before": "awaiting seed",
        "gm before": "awaiting seed",
        "commit": None,  # no failure: the commit abandons seed 1 instead of breaking the order
        "after": "fair",
        "gm after": "fair",
    }
    reason = fair.verify_fair(log.events, log.room)[at["before"]].reason
    assert reason.startswith(f"seed 1 was abandoned unrevealed (seed 2 was committed at seq {at['commit']}")


def test_a_roll_on_an_abandoned_seed_after_its_abandonment_fails() -> None:
    log, at = abandoned_log()
    late = log.roll(ANA, dice_roll(), seed=contribution("late"), n=1)
    assert log.verdicts()[late["seq"]] == "failed"
    reason = fair.verify_fair(log.events, log.room)[late["seq"]].reason
    assert reason == f"it uses seed 1 after seed 2 was committed at seq {at['commit']}, abandoning it"


def test_an_abandoned_seed_revealed_after_all_lets_its_rolls_be_checked() -> None:
    log, at = abandoned_log()
    log.reveal(1)
    verdicts = log.verdicts()
    assert (verdicts[at["before"]], verdicts[at["gm before"]]) == ("fair", "unwitnessed")
    assert "failed" not in verdicts.values()
