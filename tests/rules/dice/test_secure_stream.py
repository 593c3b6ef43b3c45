"""SecureDice's batch draw consumes the byte stream exactly as one-at-a-time rolls do.

The engine rolls pools with ``rolls`` and single dice with ``roll``; both must read the same bytes in the
same order and reject the same ones, so which of the two the engine picks never changes a result.
"""

from __future__ import annotations

import pytest

from rules.rng import SecureDice


def _pair(stream: bytes) -> tuple[SecureDice, SecureDice]:
    a, b = SecureDice(), SecureDice()
    for dice in (a, b):
        dice._buf = stream
        dice._pos = 0
    return a, b


@pytest.mark.parametrize("faces", [2, 3, 6, 7, 10, 12, 20, 100, 255])
@pytest.mark.parametrize("count", [1, 2, 3, 5, 40])
def test_rolls_reads_the_stream_like_roll(faces: int, count: int) -> None:
    # Every byte value twice, so the rejected top block is met several times inside one batch.
    stream = bytes(range(256)) * 2
    one, batch = _pair(stream)
    accepted = 2 * (256 - 256 % faces)
    done = 0
    while done + count <= accepted:
        assert batch.rolls(faces, count) == [one.roll(faces) for _ in range(count)]
        assert batch._pos == one._pos
        done += count


def test_rolls_across_a_buffer_refill_stays_in_range() -> None:
    dice = SecureDice()
    dice._buf = bytes([255, 255, 1])  # two rejected bytes for a d6, then one face; then a fresh buffer
    dice._pos = 0
    values = dice.rolls(6, 500)
    assert values[0] == 2
    assert len(values) == 500
    assert all(1 <= v <= 6 for v in values)
    # 499 fresh d6 that all miss one face: probability 6 * (5/6)**499, below 1e-38.
    assert set(values) == set(range(1, 7))
