"""A room's dice seed events (spec/fairness.md) in the core: folded in order and rendered for everyone; a
roll's ``fair`` map in its full form, its sealed placeholder and its blob. (The room does not make them yet:
the import's record checks take them once it does.)"""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack
import pytest

from relay.core import visibility
from relay.core.state import FoldError, RoomState, fold
from relay.core.visibility import FULL, SEALED, render

GM = {"id": "g1", "name": "GM", "role": "gm"}
COMMIT = hashlib.sha256(b"commitment").hexdigest()
SEED = bytes(range(32))


def event(seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "seq": seq,
        "epoch": "e",
        "ts": 1000 * seq,
        "kind": kind,
        "actor": GM,
        "visibility": "public",
        **fields,
    }


def test_seeds_fold_in_order_and_the_open_one_is_known() -> None:
    state = fold([event(1, "seed_commit", n=1, commit=COMMIT)])
    assert (state.seed_n, state.seed_commit, state.seed_open, state.seed_opened) == (1, COMMIT, True, 1000)
    copy = state.copy()
    fold([event(2, "seed_reveal", n=1, seed=SEED), event(3, "seed_commit", n=2, commit=COMMIT)], copy)
    assert (copy.seed_n, copy.seed_open, copy.seed_rolls) == (2, True, 0)
    assert (state.seed_n, state.seed_open) == (1, True), "a copy folds on its own"


@pytest.mark.parametrize(
    "log",
    [
        [event(1, "seed_commit", n=2, commit=COMMIT)],  # not the next number
        [event(1, "seed_commit", n=1, commit=COMMIT), event(2, "seed_commit", n=1, commit=COMMIT)],  # again
        [event(1, "seed_reveal", n=1, seed=SEED)],  # nothing open
        [event(1, "seed_commit", n=1, commit=COMMIT), event(2, "seed_reveal", n=2, seed=SEED)],  # another
    ],
)
def test_a_seed_out_of_turn_is_refused_by_the_fold(log: list[dict[str, Any]]) -> None:
    with pytest.raises(FoldError):
        fold(log)


def test_the_next_seed_committed_while_one_is_open_abandons_it() -> None:
    # Only an import of a room without its open seed's secret writes this (docs/fairness.md, (7)).
    state = fold([event(1, "seed_commit", n=1, commit=COMMIT), event(2, "seed_commit", n=2, commit=COMMIT)])
    assert (state.seed_n, state.seed_open, state.seed_opened, state.seed_commits[1]) == (
        2,
        True,
        2000,
        COMMIT,
    )


def test_rolls_on_a_seed_are_counted() -> None:
    roll = event(2, "roll", label=None, intent={"system": "dice"}, result={"total": 1}, fair={"n": 1})
    state = fold([event(1, "seed_commit", n=1, commit=COMMIT), roll])
    assert state.seed_rolls == 1


def test_seed_events_render_their_public_fields_for_everyone() -> None:
    state = RoomState()
    commit = render(event(1, "seed_commit", n=1, commit=COMMIT), FULL, state)
    reveal = render(event(2, "seed_reveal", n=1, seed=SEED), FULL, state)
    assert (commit["n"], commit["commit"]) == (1, COMMIT)
    assert (reveal["n"], reveal["seed"]) == (1, SEED)


def test_a_sealed_placeholder_shows_only_what_each_witness_checks_and_the_blob_holds_the_rest() -> None:
    fair: dict[str, Any] = {"n": 1, "seed": None, "pending": 3, "nonce": b"n" * 32, "draws": [[6, 4]]}
    fair["witnesses"] = [["p2", b"w" * 16]]
    roll = event(4, "roll", label="secret", intent={"system": "dice"}, result={"total": 4}, fair=fair)
    roll["visibility"] = "gm"
    roll["sealed"] = visibility.seal(visibility.body_of(roll), b"x" * 32)
    state = fold([event(1, "join", member=GM), event(2, "seed_commit", n=1, commit=COMMIT)])
    state.seq = 3  # the pending event's seq, folded elsewhere
    placeholder = render(roll, SEALED, state)
    assert placeholder["fair"] == {"n": 1, "pending": 3, "witnesses": [["p2", b"w" * 16]]}
    assert "draws" not in str(placeholder)
    assert "secret" not in str(placeholder)
    assert render(roll, FULL, state)["fair"] == fair
    assert msgpack.unpackb(roll["sealed"]["blob"], raw=False)["fair"]["draws"] == [[6, 4]]
