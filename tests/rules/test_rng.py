"""The random sources: SecureDice is uniform and in range, Scripted is exact, roll_many uses either.

Statistical tests fail at a chi-square p-value below 1e-6; there are 12 of them, so the file raises a
false alarm with probability below 1.2e-5. The exact tests below feed SecureDice every possible byte
pattern once and check that each face comes out exactly equally often, which no sample size can do.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy import stats

from rules import RulesError
from rules.rng import Dice, Scripted, SecureDice, roll_many

P_LIMIT = 1e-6
FACES = [1, 2, 6, 10, 12, 20, 100, 255, 256, 257, 1000, 65537]


def draws(faces: int) -> int:
    # At least 50 expected per face, and never fewer than 50,000 dice.
    return max(50_000, 50 * faces)


@pytest.mark.parametrize("faces", FACES)
def test_secure_dice_are_uniform_and_in_range(faces: int) -> None:
    n = draws(faces)
    values = np.array(SecureDice().rolls(faces, n))
    assert values.min() >= 1
    assert values.max() <= faces
    if faces == 1:
        assert (values == 1).all()
        return
    counts = np.bincount(values, minlength=faces + 1)[1:]
    p_value = stats.chisquare(counts).pvalue
    assert p_value >= P_LIMIT, f"d{faces}: p={p_value:.2e}"


def test_consecutive_rolls_are_independent() -> None:
    # Pairs of consecutive d6 rolls fall evenly into the 36 cells.
    values = np.array(SecureDice().rolls(6, 200_000)) - 1
    pairs = values[0::2] * 6 + values[1::2]
    counts = np.bincount(pairs, minlength=36)
    assert stats.chisquare(counts).pvalue >= P_LIMIT


def test_roll_and_rolls_share_one_stream_without_repeating_it() -> None:
    dice = SecureDice()
    first = [dice.roll(1000) for _ in range(200)]
    second = dice.rolls(1000, 200)
    # Two 200-roll runs of a d1000 agree in every position with probability 1e-600.
    assert first != second


@pytest.mark.parametrize(("faces", "width"), [(2, 1), (6, 1), (10, 1), (255, 1), (256, 1), (1000, 2)])
def test_every_byte_pattern_maps_to_faces_equally(faces: int, width: int) -> None:
    # Hand the generator each of the 256**width possible draws once, in order: the accepted ones must
    # hit every face exactly equally often (rejection sampling, no modulo bias).
    space = 256**width
    dice = SecureDice()
    dice._buf = b"".join(v.to_bytes(width, "little") for v in range(space))
    dice._pos = 0
    accepted = space - space % faces
    counts = np.bincount([dice.roll(faces) for _ in range(accepted)], minlength=faces + 1)[1:]
    assert (counts == accepted // faces).all()
    # Every draw at or above the limit was skipped: the buffer is used up exactly at the end.
    assert dice._pos == accepted * width


@pytest.mark.parametrize(("faces", "width"), [(6, 1), (10, 1), (255, 1), (256, 1), (1000, 2)])
def test_rejected_draws_in_the_middle_are_skipped(faces: int, width: int) -> None:
    # The same draws as above in a scrambled order (an odd multiplier permutes 0..space-1), so the
    # rejected ones are spread through the stream: each face still comes out exactly equally often,
    # and the stream ends just after the last accepted draw, whether rolled one by one or in a batch.
    space = 256**width
    order = [v * 167 % space for v in range(space)]
    stream = b"".join(v.to_bytes(width, "little") for v in order)
    accepted = space - space % faces
    last = max(i for i, v in enumerate(order) if v < accepted)
    for batch in (False, True):
        dice = SecureDice()
        dice._buf, dice._pos = stream, 0
        faces_out = dice.rolls(faces, accepted) if batch else [dice.roll(faces) for _ in range(accepted)]
        counts = np.bincount(faces_out, minlength=faces + 1)[1:]
        assert (counts == accepted // faces).all()
        assert dice._pos == (last + 1) * width


@pytest.mark.parametrize("faces", [2, 6, 10, 20, 100, 255, 256, 1000])
def test_rolls_draws_what_roll_would_draw(faces: int) -> None:
    one, batch = SecureDice(), SecureDice()
    stream = os.urandom(16384)
    one._buf = batch._buf = stream
    count = 2000
    singles = [one.roll(faces) for _ in range(count)]
    assert batch.rolls(faces, count) == singles
    assert batch._pos == one._pos


@pytest.mark.parametrize("faces", [2, 3, 6, 7, 10, 12, 20, 100, 128, 255])
def test_batch_table_maps_every_byte_equally(faces: int) -> None:
    # The batch path turns bytes into faces with a translation table: translating all 256 byte values
    # once must give every face exactly equally often and drop exactly the incomplete top block.
    dice = SecureDice()
    table, reject = dice._table(faces)
    faces_out = bytes(range(256)).translate(table, reject)
    assert len(faces_out) == 256 - 256 % faces
    counts = np.bincount(list(faces_out), minlength=faces + 1)
    assert counts[0] == 0
    assert (counts[1:] == 256 // faces).all()


def test_huge_dice_stay_in_range() -> None:
    dice = SecureDice()
    for faces in (2**16, 2**16 + 1, 2**31 - 1, 2**32, 2**32 + 1, 10**12, 2**64):
        values = dice.rolls(faces, 500)
        assert all(1 <= v <= faces for v in values)
        # 500 draws of a die this large are not all in its lower half (probability 2**-500).
        assert max(values) > faces // 2


@pytest.mark.parametrize("faces", [0, -1, 2**64 + 1])
def test_impossible_dice_are_refused(faces: int) -> None:
    with pytest.raises(RulesError) as caught:
        SecureDice().roll(faces)
    assert caught.value.code == "out_of_range"


def test_sources_follow_the_dice_protocol() -> None:
    assert isinstance(SecureDice(), Dice)
    assert isinstance(Scripted([1]), Dice)


def test_scripted_hands_out_values_in_order() -> None:
    dice = Scripted([3, 1, 6, 20])
    assert dice.remaining == 4
    assert [dice.roll(6), dice.roll(6), dice.roll(6)] == [3, 1, 6]
    assert dice.remaining == 1
    assert dice.roll(20) == 20
    assert dice.remaining == 0


def test_scripted_accepts_any_iterable() -> None:
    dice = Scripted(v for v in (2, 4))
    assert [dice.roll(4), dice.roll(4)] == [2, 4]


def test_scripted_raises_when_it_runs_out() -> None:
    dice = Scripted([5])
    dice.roll(10)
    with pytest.raises(RulesError) as caught:
        dice.roll(10)
    assert caught.value.code == "script_exhausted"
    assert "ran out" in caught.value.message
    with pytest.raises(RulesError) as caught:
        Scripted([]).roll(6)
    assert caught.value.code == "script_exhausted"


@pytest.mark.parametrize(("value", "faces"), [(7, 6), (0, 6), (-1, 20), (11, 10)])
def test_scripted_refuses_a_face_the_die_does_not_have(value: int, faces: int) -> None:
    dice = Scripted([value, 1])
    with pytest.raises(RulesError) as caught:
        dice.roll(faces)
    assert caught.value.code == "script_exhausted"
    assert f"d{faces}" in caught.value.message
    # The impossible value is not consumed: the script did not move.
    assert dice.remaining == 2


def test_roll_many_with_a_batch_source_and_without() -> None:
    assert roll_many(Scripted([1, 2, 3]), 6, 3) == [1, 2, 3]
    assert roll_many(Scripted([]), 6, 0) == []
    values = roll_many(SecureDice(), 8, 1000)
    assert len(values) == 1000
    assert set(values) == set(range(1, 9))  # each face is missed with probability 8 * (7/8)**1000
    with pytest.raises(RulesError):
        roll_many(Scripted([1, 2]), 6, 3)


def test_roll_many_uses_a_plain_roll_method() -> None:
    class Counting:
        def __init__(self) -> None:
            self.calls = 0

        def roll(self, faces: int) -> int:
            self.calls += 1
            return faces

    source = Counting()
    assert roll_many(source, 4, 5) == [4] * 5
    assert source.calls == 5
