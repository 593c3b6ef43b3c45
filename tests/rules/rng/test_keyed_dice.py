"""KeyedDice: the fair stream of spec/fairness.md is read exactly, rejects exactly the words it must, and is
uniform.

The chi-square tests read the streams of fixed keys, so they are reproducible; each fails at a p-value
below 1e-6 (the large dice's two bucketings each below 5e-7), and there are 6 + 4 of them, so a sound
stream raises a false alarm with probability below 1e-5 whichever keys were fixed (DESIGN.md asks for
below 1e-4).
"""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from rules import RulesError, resolve
from rules.rng import WORD_SPACE, Dice, KeyedDice, acceptance_limit, keyed_words, roll_many

P_LIMIT = 1e-6
KEYS = [hashlib.sha256(b"tablerelay keyed dice test %d" % i).digest() for i in range(4)]
TOP = WORD_SPACE - 1


def stream(key: bytes, faces: int, count: int) -> np.ndarray:
    # Four keys share the draws, so one unlucky key could not carry a whole test.
    per_key = -(-count // len(KEYS))
    return np.array([v for key in KEYS for v in KeyedDice(key).rolls(faces, per_key)], dtype=object)


# -- the stream as the spec words it -----------------------------------------------------------------------


def test_the_words_are_the_hmac_blocks_cut_in_four_big_endian() -> None:
    key = KEYS[0]
    words = keyed_words(key)
    for j in range(3):
        block = hmac.new(key, b"faces" + j.to_bytes(4, "big"), hashlib.sha256).digest()
        expected = [int.from_bytes(block[i : i + 8], "big") for i in range(0, 32, 8)]
        assert [next(words) for _ in range(4)] == expected


def test_a_die_is_one_plus_the_word_mod_its_faces_and_every_draw_is_recorded() -> None:
    key = KEYS[1]
    words = keyed_words(key)
    dice = KeyedDice(key)
    faces = [20, 20, 6, 1, 100, 2**64, 12, 10]
    values = [dice.roll(f) for f in faces]
    # None of these dice reject a word of this key's first ones (checked, not assumed).
    expected = []
    for f in faces:
        word = next(words)
        assert word < acceptance_limit(f)
        expected.append(word % f + 1)
    assert values == expected
    assert dice.draws == list(zip(faces, values, strict=True))


def test_rolls_draws_the_same_words_as_single_rolls_in_order() -> None:
    one, many = KeyedDice(KEYS[2]), KeyedDice(KEYS[2])
    singles = [one.roll(6) for _ in range(50)] + [one.roll(20)]
    batch = many.rolls(6, 50) + many.rolls(20, 1)
    assert batch == singles
    assert many.draws == one.draws
    assert many.rolls(6, 0) == []


def test_keyed_dice_is_a_dice_source_and_roll_many_uses_its_batch() -> None:
    dice = KeyedDice(KEYS[3])
    assert isinstance(dice, Dice)
    values = roll_many(dice, 8, 5)
    assert dice.draws == [(8, v) for v in values]


def test_the_same_key_resolves_the_same_roll_with_the_same_draws() -> None:
    intent = {"system": "dice", "formula": "4d6kh3 + 1d20"}
    first, second = KeyedDice(KEYS[0]), KeyedDice(KEYS[0])
    assert resolve(intent, rng=first) == resolve(intent, rng=second)
    assert first.draws == second.draws
    assert [f for f, _ in first.draws] == [6, 6, 6, 6, 20]


def test_a_key_is_32_bytes_and_the_source_takes_a_key_or_words() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        KeyedDice(b"short")
    with pytest.raises(TypeError):
        KeyedDice()
    with pytest.raises(TypeError):
        KeyedDice(KEYS[0], words=[1])


# -- the rejection path, driven by crafted words -----------------------------------------------------------


def limit_of(faces: int) -> int:
    return WORD_SPACE - WORD_SPACE % faces


@pytest.mark.parametrize(
    ("faces", "limit"),
    [
        (1, WORD_SPACE),
        (2, WORD_SPACE),
        (3, WORD_SPACE - 1),  # 2**64 = 3 * (2**64 - 1) / 3 + 1
        (6, WORD_SPACE - 4),
        (2**32, WORD_SPACE),
        (2**63, WORD_SPACE),
        (2**63 + 1, 2**63 + 1),  # one multiple only: almost half of all words are thrown away
        (2**64 - 1, 2**64 - 1),
        (2**64, WORD_SPACE),
    ],
)
def test_the_acceptance_limit_is_the_largest_multiple_of_the_faces(faces: int, limit: int) -> None:
    assert acceptance_limit(faces) == limit == limit_of(faces)
    assert limit % faces == 0


@pytest.mark.parametrize("faces", [3, 6, 10, 2**63 + 1, 2**64 - 1, 3 * 2**62, 2**62 + 3])
def test_a_word_at_or_above_the_limit_is_discarded_and_the_next_one_taken(faces: int) -> None:
    limit = acceptance_limit(faces)
    assert limit < WORD_SPACE, "a die with a rejected top block"
    below, at = limit - 1, limit
    # Just below the limit: kept, and it shows the top face (the limit is a multiple of the faces).
    dice = KeyedDice.from_words([below])
    assert dice.roll(faces) == faces
    # At, just above and at the very top: each discarded in turn; the next word (0) shows face 1.
    rejected = sorted({at, min(at + 1, TOP), TOP})
    dice = KeyedDice.from_words([*rejected, 0, below])
    assert dice.roll(faces) == 1
    assert dice.roll(faces) == faces
    assert dice.draws == [(faces, 1), (faces, faces)]


def test_crafted_words_for_f3_by_hand() -> None:
    # 2**64 mod 3 = 1, so only the very top word is thrown away; 2**64 - 2 = 3 * 6148914691236517204 + 2.
    dice = KeyedDice.from_words([TOP, TOP - 1, 0, 1, 2, 3])
    assert dice.rolls(3, 5) == [3, 1, 2, 3, 1]


def test_one_face_and_two_to_the_64_faces() -> None:
    dice = KeyedDice.from_words([TOP, 0, 12345, TOP, 0])
    # A d1 always shows 1, yet takes a word like any die (no word is ever thrown away for it).
    assert dice.rolls(1, 2) == [1, 1]
    # A die of 2**64 faces keeps every word: the face is the word plus one.
    assert dice.rolls(2**64, 3) == [12346, 2**64, 1]
    assert dice.draws == [(1, 1), (1, 1), (2**64, 12346), (2**64, 2**64), (2**64, 1)]


@pytest.mark.parametrize("faces", [0, -1, 2**64 + 1, 2**70])
def test_dice_outside_1_to_2_to_the_64_faces_are_refused_as_securedice_does(faces: int) -> None:
    dice = KeyedDice(KEYS[0])
    with pytest.raises(RulesError) as info:
        dice.roll(faces)
    assert info.value.code == "out_of_range"
    assert dice.draws == []


def test_words_that_run_out_or_are_not_64_bit_are_refused() -> None:
    dice = KeyedDice.from_words([5])
    assert dice.roll(6) == 6
    with pytest.raises(RulesError) as info:
        dice.roll(6)
    assert info.value.code == "script_exhausted"
    # Only rejected words left is running out too.
    with pytest.raises(RulesError) as info:
        KeyedDice.from_words([TOP]).roll(3)
    assert info.value.code == "script_exhausted"
    for bad in (-1, WORD_SPACE):
        with pytest.raises(RulesError) as info:
            KeyedDice.from_words([bad]).roll(6)
        assert info.value.code == "out_of_range"


@given(
    faces=st.integers(1, WORD_SPACE),
    words=st.lists(st.integers(0, TOP), min_size=1, max_size=8),
)
def test_any_words_give_the_first_kept_word_mod_the_faces(faces: int, words: list[int]) -> None:
    limit = WORD_SPACE - WORD_SPACE % faces
    kept = [w for w in words if w < limit]
    dice = KeyedDice.from_words(words)
    if not kept:
        with pytest.raises(RulesError):
            dice.roll(faces)
        return
    assert dice.roll(faces) == kept[0] % faces + 1
    assert 1 <= dice.draws[0][1] <= faces


# -- uniformity --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("faces", [2, 6, 10, 12, 20, 100])
def test_keyed_dice_are_uniform(faces: int) -> None:
    # At least 1,000 expected per face and never fewer than 200,000 dice (50,000 HMAC blocks, a second).
    values = stream(KEYS[0], faces, max(200_000, 1_000 * faces)).astype(np.int64)
    assert values.min() >= 1
    assert values.max() <= faces
    counts = np.bincount(values, minlength=faces + 1)[1:]
    p_value = stats.chisquare(counts).pvalue
    assert p_value >= P_LIMIT, f"d{faces}: p={p_value:.2e}"


def exact_residue_shares(faces: int, buckets: int) -> np.ndarray:
    """How many of the faces 1..f have (face - 1) mod ``buckets`` = r, for each r: exact, not assumed."""
    base, extra = divmod(faces, buckets)
    return np.array([base + (1 if r < extra else 0) for r in range(buckets)], dtype=float)


def exact_top_shares(faces: int, buckets: int) -> np.ndarray:
    """How many faces fall in each of ``buckets`` equal slices by (face - 1) * buckets // f."""
    starts = [-(-faces * b // buckets) for b in range(buckets + 1)]  # the first face - 1 in slice b
    return np.array([starts[b + 1] - starts[b] for b in range(buckets)], dtype=float)


@pytest.mark.slow
@pytest.mark.parametrize(
    "faces",
    [
        2**32 - 5,  # near 2**32, not a power of two
        2**32 + 15,
        2**63 + 1,  # almost every other word rejected: the rejection must not bend the faces
        3 * 2**62,
    ],
)
def test_large_dice_are_uniform_by_low_and_top_bits(faces: int) -> None:
    buckets = 16
    zero_based = [v - 1 for v in stream(KEYS[1], faces, 160_000)]
    assert min(zero_based) >= 0
    assert max(zero_based) < faces
    n = len(zero_based)
    for name, bucket_of, shares in (
        ("low", [v % buckets for v in zero_based], exact_residue_shares(faces, buckets)),
        ("top", [v * buckets // faces for v in zero_based], exact_top_shares(faces, buckets)),
    ):
        counts = np.bincount(np.array(bucket_of, dtype=np.int64), minlength=buckets)
        expected = shares / shares.sum() * n
        p_value = stats.chisquare(counts, expected).pvalue
        assert p_value >= P_LIMIT / 2, f"d{faces} by {name} bits: p={p_value:.2e}"
