"""Fair dice in the room (spec/fairness.md, ``fair_dice`` on): a roll's dice follow from the room's committed
seed and the roller's seed, seed events come in order, seeds are revealed by count and by a GM, and the
spec-only verifier (tests/spec_fairness.py, which imports nothing of relay) recomputes every roll."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import rules
from relay.core import fairness
from relay.core.actions import PrepareSeed
from relay.core.canonical import canonical
from relay.fairness import verify_fair
from relay.settings.config import Limits
from tests import spec_fairness
from tests.relay.helpers import INFO, Table, frame

SEEDS = {n: bytes([n]) * 32 for n in range(1, 6)}
ROLLER_SEED = bytes(range(16))


def fair_table(limits: Limits | None = None, stored: dict[int, bytes] | None = None) -> Table:
    return Table(limits=limits, seeds=SEEDS if stored is None else stored)


def roll(rid: str, formula: str = "4d6", **extra: Any) -> dict[str, Any]:
    return {
        "t": "roll",
        "id": rid,
        "intent": {"system": "dice", "formula": formula},
        "visibility": "public",
        **extra,
    }


def test_the_first_roll_commits_the_first_seed_and_its_dice_follow_from_it() -> None:
    table = fair_table()
    ana = table.join("player")
    got = table.send(ana, roll("r1", seed=ROLLER_SEED))
    kinds = [r["kind"] for r in table.stored]
    assert kinds == ["join", "seed_commit", "roll"]
    commit, stored_roll = table.stored[1], table.stored[2]
    assert commit["n"] == 1
    assert commit["commit"] == spec_fairness.seed_commit(INFO.id, 1, SEEDS[1])
    ack = next(f for f in got if f["t"] == "ack")
    assert ack["seq"] == stored_roll["seq"], "the ack names the roll, not its seed event"
    fair = stored_roll["fair"]
    assert (fair["n"], fair["seed"], fair["pending"], fair["nonce"], fair["witnesses"]) == (
        1,
        ROLLER_SEED,
        None,
        None,
        [],
    )
    assert [faces for faces, _ in fair["draws"]] == [6, 6, 6, 6]
    assert [value for _, value in fair["draws"]] == [d["value"] for d in stored_roll["result"]["dice"]]
    assert spec_fairness.draws_match(SEEDS[1], INFO.id, stored_roll), (
        "the spec's own stream gives the same draws"
    )
    assert table.room.committed.seed_rolls == 1


def test_the_same_roll_on_another_roller_seed_draws_other_dice() -> None:
    draws = []
    for roller_seed in (ROLLER_SEED, bytes(16)):
        table = fair_table()
        ana = table.join("player")
        table.send(ana, roll("r1", "20d20", seed=roller_seed))
        draws.append(table.stored[-1]["fair"]["draws"])
    assert draws[0] != draws[1]


def test_the_same_seedless_roll_twice_on_one_seed_draws_fresh_dice_and_stays_unwitnessed() -> None:
    """Without the server's nonce the transcripts of two seedless rolls of one intent would be equal, and so
    would their dice (docs/fairness.md: the one addition to the spec)."""
    table = fair_table()
    gm = table.join("gm", sub="gm-1")
    for rid in ("g1", "g2"):
        table.send(gm, roll(rid, "20d20"))
    table.send(gm, roll("g3", "20d20", seed=ROLLER_SEED))
    rolls = [r for r in table.stored if r["kind"] == "roll"]
    first, second, seeded = (r["fair"] for r in rolls)
    assert first["draws"] != second["draws"]
    assert len(first["nonce"]) == len(second["nonce"]) == 32
    assert first["nonce"] != second["nonce"]
    assert seeded["nonce"] is None, "a roller seed varies the dice: no nonce of the server's beside it"
    table.send(gm, {"t": "seed", "id": "s1", "op": "reveal"})
    assert [r["kind"] for r in table.stored][-2:] == ["seed_reveal", "seed_commit"]
    theirs = spec_fairness.verdicts(table.stored, INFO.id)
    ours = verify_fair(table.stored, INFO.id)
    assert [theirs[r["seq"]] for r in rolls] == ["unwitnessed"] * 3
    assert [ours[r["seq"]].verdict for r in rolls] == ["unwitnessed"] * 3
    # A nonce of the server's beside a roller seed is no form the relay makes: both verifiers fail it.
    forged = [dict(r) for r in table.stored]
    last = next(r for r in reversed(forged) if r["kind"] == "roll")
    last["fair"] = {**last["fair"], "nonce": first["nonce"]}
    assert spec_fairness.verdicts(forged, INFO.id)[last["seq"]] == "failed"
    assert verify_fair(forged, INFO.id)[last["seq"]].verdict == "failed"


def test_a_seed_is_revealed_after_its_rolls_and_the_next_one_committed_in_the_same_append() -> None:
    table = fair_table(limits=dataclasses.replace(Limits(), seed_rolls=2))
    ana = table.join("player")
    for i in range(3):
        table.send(ana, roll(f"r{i}", seed=ROLLER_SEED))
    kinds = [r["kind"] for r in table.stored]
    assert kinds == ["join", "seed_commit", "roll", "roll", "seed_reveal", "seed_commit", "roll"]
    reveal = table.stored[4]
    assert (reveal["n"], reveal["seed"]) == (1, SEEDS[1])
    assert table.stored[-1]["fair"]["n"] == 2
    verdicts = spec_fairness.verdicts(table.stored, INFO.id)
    assert [verdicts[r["seq"]] for r in table.stored if r["kind"] == "roll"] == [
        "fair",
        "fair",
        "awaiting seed",
    ]


def test_a_gm_reveals_the_open_seed_and_the_room_asks_for_the_next_one() -> None:
    table = fair_table(stored={1: SEEDS[1], 2: SEEDS[2]})
    gm, ana = table.join("gm", sub="gm-1"), table.join("player")
    table.send(ana, roll("r1", seed=ROLLER_SEED))
    assert table.send(ana, {"t": "seed", "id": "s0", "op": "reveal"})[0]["code"] == "forbidden"
    actions = table.room.handle(gm, frame({"t": "seed", "id": "s1", "op": "reveal"}))
    assert PrepareSeed(3) in actions, "the seed after the new open one is asked for"
    table.execute(actions)
    table.commit()
    assert [r["kind"] for r in table.stored][-2:] == ["seed_reveal", "seed_commit"]
    assert next(f for f in table.replies(gm) if f["t"] == "ack")["seq"] == table.stored[-2]["seq"]
    assert spec_fairness.verdicts(table.stored, INFO.id)[table.stored[3]["seq"]] == "fair"


def test_a_roll_waits_for_a_seed_that_is_not_stored_yet_and_nothing_is_appended() -> None:
    table = fair_table(stored={})
    ana = table.join("player")
    before = list(table.stored)
    error = table.send(ana, roll("r1"))[0]
    assert (error["t"], error["code"]) == ("error", "conflict")
    assert table.stored == before


def test_a_gm_roll_without_a_roller_seed_is_unwitnessed_not_fair() -> None:
    table = fair_table(limits=dataclasses.replace(Limits(), seed_rolls=1))
    gm = table.join("gm", sub="gm-1")
    table.send(gm, roll("g1", seed=ROLLER_SEED))
    table.send(gm, roll("g2"))
    verdicts = spec_fairness.verdicts(table.stored, INFO.id)
    first = next(r for r in table.stored if r["kind"] == "roll")
    assert verdicts[first["seq"]] == "unwitnessed", "a GM's own seed is no outside contribution"


def test_the_worked_example_of_docs_fairness_md_is_what_the_relay_computes() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "fairness.md").read_text(encoding="utf-8")
    room, seed = "c0ffee00c0ffee00", bytes(range(32))
    commit = fairness.seed_commit(room, 1, seed)
    roll = fairness.transcript(
        room=room,
        n=1,
        roller="a1b2c3d4e5f60718",
        visibility="public",
        intent={"system": "dice", "formula": "2d6"},
        label="Sneak attack",
        seed=bytes(range(16)),
        pending=None,
        nonce=None,
        witnesses=(),
    )
    dice = fairness.dice(seed, roll)
    result = rules.resolve({"system": "dice", "formula": "2d6"}, rng=dice)
    assert commit in doc
    assert canonical(roll).hex() in doc.replace("\n", "")
    assert fairness.roll_key(seed, roll).hex() in doc
    assert dice.draws == [(6, 1), (6, 3)]
    assert result["total"] == 4


def test_a_welcome_names_the_commitment_of_every_seed_its_history_uses() -> None:
    table = fair_table(limits=dataclasses.replace(Limits(), seed_rolls=1))
    ana = table.join("player")
    for i in range(3):
        table.send(ana, roll(f"r{i}", seed=ROLLER_SEED))
    history = [table.forms.frame(r, "full", table.room.committed) for r in table.stored[-2:]]
    welcome = table.room.welcome(ana, "token", history, True)
    assert welcome["seed"] == {"n": 3, "commit": table.room.committed.seed_commit}
    assert [s["n"] for s in welcome["seeds"]] == [3], "only the seeds from the history's first roll on"
    everything = [table.forms.frame(r, "full", table.room.committed) for r in table.stored]
    seeds = table.room.welcome(ana, "token", everything, True)["seeds"]
    assert [s["n"] for s in seeds] == [1, 2, 3]
    assert seeds[0]["commit"] == spec_fairness.seed_commit(INFO.id, 1, SEEDS[1])


def test_a_seed_being_stored_is_asked_for_once_and_again_only_if_it_could_not_be() -> None:
    table = fair_table(stored={1: SEEDS[1], 2: SEEDS[2]}, limits=dataclasses.replace(Limits(), seed_rolls=1))
    ana = table.join("player")
    asked = []
    for i in range(4):
        actions = table.room.handle(ana, frame(roll(f"r{i}")))
        asked += [a.n for a in actions if isinstance(a, PrepareSeed)]
        table.execute(actions)
        table.commit()
    assert asked == [3], "seed 3 is asked for once while it is being stored"
    assert table.room.fair is not None
    table.room.fair.seeds.not_stored(3)
    actions = table.room.handle(ana, frame(roll("r9")))
    assert PrepareSeed(3) in actions, "asked again once the shell could not store it"
