"""Properties of every system in spec/rules.md (except ``dice``, tested with the notation engine).

For each system, a strategy of valid intents written from the spec (not from the code), and a
strategy of junk: valid intents with keys replaced, added or dropped, values of every type, and maps
of random keys. Valid intents never raise; junk raises nothing but ``RulesError``; every result keeps
the common shape and survives MessagePack and JSON unchanged. The strategies are in
tests/rules/intents.py.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings

import rules
from rules import RulesError, resolve
from rules.errors import CODES
from rules.rng import SecureDice
from tests.rules.intents import SYSTEMS, VALID, Intent, junk_intent

DICE = SecureDice()
#: A hang guard, not a benchmark: one resolve is well under a millisecond.
SLOW = 0.05

# --- the properties ------------------------------------------------------------------------------------


def elapsed(value: Any) -> float:
    started = time.perf_counter()
    with contextlib.suppress(RulesError):
        resolve(value, rng=DICE)
    return time.perf_counter() - started


def timed_resolve(value: Any) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        return resolve(value, rng=DICE)
    finally:
        took = time.perf_counter() - started
        if took >= SLOW:
            # A busy machine can pause any one call; a slow intent is slow every time.
            took = min(took, *(elapsed(value) for _ in range(3)))
        assert took < SLOW, f"resolve took {took * 1000:.1f} ms for {value!r}"


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_shape(system: str, result: dict[str, Any]) -> None:
    assert result["system"] == system
    assert isinstance(result["dice"], list)
    for d in result["dice"]:
        assert is_int(d["faces"]), d
        assert d["faces"] >= 1, d
        assert is_int(d["value"]), d
        assert isinstance(d["kept"], bool), d
    assert result["total"] is None or is_int(result["total"])
    assert isinstance(result["formula"], str)
    assert isinstance(result["text"], str)
    assert result["text"]
    for effect in result.get("effects", []):
        assert set(effect) == {"resource", "delta"}, effect
        assert effect["resource"] in {"fear", "hope"}, effect
        assert is_int(effect["delta"]), effect
    for resource, amount in result.get("requires", {}).items():
        assert resource in {"fear", "hope"}
        assert is_int(amount)
        assert amount > 0


# --- what the spec promises about each system's own fields ----------------------------------------------


def values_of(result: dict[str, Any], **marks: Any) -> list[int]:
    return [d["value"] for d in result["dice"] if all(d.get(k) == v for k, v in marks.items())]


def drawsteel_power_promises(intent: Intent, result: dict[str, Any]) -> None:
    assert [d["faces"] for d in result["dice"]] == [10, 10]
    assert result["natural"] == sum(values_of(result))
    assert result["edge_state"] in {"none", "edge", "double_edge", "bane", "double_bane"}
    assert result["tier"] in {1, 2, 3}
    assert result["tier_rolled"] in {1, 2, 3}
    kind = intent.get("kind", "ability")
    assert result["critical"] is (result["natural"] >= 19 and kind == "ability")
    step = {"edge": 2, "bane": -2}.get(result["edge_state"], 0)
    expected = result["natural"] + intent.get("characteristic", 0) + intent.get("bonus", 0) + step
    assert result["total"] == expected
    if result["natural"] >= 19:
        assert result["tier_rolled"] == 3
    if not intent.get("auto_tiers") and intent.get("downgrade_to") is None:
        assert result["tier"] == result["tier_rolled"]
        assert result["automatic"] is None
    if intent.get("downgrade_to") is not None:
        assert result["tier"] <= intent["downgrade_to"] or result["automatic"] is not None


def drawsteel_ability_promises(intent: Intent, result: dict[str, Any]) -> None:
    assert [d["faces"] for d in result["dice"]] == [10, 10]
    assert result["natural"] == sum(values_of(result))
    assert len(result["targets"]) == len(intent.get("targets", [None]))
    for target in result["targets"]:
        assert target["tier"] in {1, 2, 3}
        assert target["damage"] is None or (is_int(target["damage"]) and target["damage"] >= 0)
        assert target["critical"] is (result["natural"] >= 19)
        assert target["effect"] is None or isinstance(target["effect"], str)


def daggerheart_duality_promises(intent: Intent, result: dict[str, Any]) -> None:
    hope, fear = result["dice"][0], result["dice"][1]
    assert (hope["faces"], hope["role"], fear["faces"], fear["role"]) == (12, "hope", 12, "fear")
    assert (result["hope_die"], result["fear_die"]) == (hope["value"], fear["value"])
    if hope["value"] == fear["value"]:
        assert result["with"] == "critical"
        assert result["success"] is True
    else:
        assert result["with"] == ("hope" if hope["value"] > fear["value"] else "fear")
    net = intent.get("advantage", 0) - intent.get("disadvantage", 0)
    assert (result["advantage_die"] is None) is (net == 0)
    if result["advantage_die"] is not None:
        assert (result["advantage_die"] > 0) is (net > 0)
    spent = intent.get("experience", 0) if intent.get("spend_hope") else 0
    total = hope["value"] + fear["value"] + (result["advantage_die"] or 0) + intent.get("modifier", 0) + spent
    assert result["total"] == total
    if result["with"] != "critical":
        difficulty = intent.get("difficulty")
        assert result["success"] == (None if difficulty is None else total >= difficulty)
    gains = [e for e in result.get("effects", []) if e["delta"] > 0]
    if intent.get("reaction"):
        assert gains == []
    else:
        resource = "fear" if result["with"] == "fear" else "hope"
        assert gains == [{"resource": resource, "delta": 1}]
    assert result.get("requires", {}) == ({"hope": 1} if intent.get("spend_hope") else {})


def daggerheart_attack_promises(intent: Intent, result: dict[str, Any]) -> None:
    assert all(d["faces"] == 20 for d in result["dice"])
    kept = values_of(result, kept=True)
    assert kept == [result["natural"]]
    both = intent.get("advantage", False) == intent.get("disadvantage", False)
    assert len(result["dice"]) == (1 if both else 2)
    assert result["critical"] is (result["natural"] >= intent.get("crit_threshold", 20))
    spent = intent.get("experience", 0) if intent.get("spend_fear") else 0
    assert result["total"] == result["natural"] + intent["modifier"] + spent
    assert len(result["targets"]) == len(intent.get("targets", []))
    for asked, target in zip(intent.get("targets", []), result["targets"], strict=True):
        assert target["hit"] is (result["critical"] or result["total"] >= asked["evasion"])
        assert target["critical"] is result["critical"]
    assert result.get("requires", {}) == ({"fear": 1} if intent.get("spend_fear") else {})


def honors_edge_promises(intent: Intent, result: dict[str, Any]) -> None:
    rolled, kept = result["rolled"], result["kept"]
    assert len(result["dice"]) == rolled
    assert sum(d["kept"] for d in result["dice"]) == min(rolled, kept)
    for d in result["dice"]:
        assert d["faces"] == 10
        assert d["value"] == sum(d["chain"])
        assert d["exploded"] is (len(d["chain"]) > 1)
        assert all(face == 10 for face in d["chain"][:-1])
        if not intent.get("explode", True):
            assert len(d["chain"]) == 1
    dropped, chosen = values_of(result, kept=False), values_of(result, kept=True)
    if dropped and chosen:
        assert min(chosen) >= max(dropped)
    assists = sum(intent.get("assist_ranks", []))
    assert result["total"] == sum(values_of(result, kept=True)) + intent.get("bonus", 0) + assists
    tn = intent.get("tn")
    assert result["tn"] == tn
    if tn is None:
        assert (result["success"], result["success_margins"], result["failure_margins"]) == (None, None, None)
    else:
        assert result["success"] is (result["total"] >= tn)
        assert result["success_margins"] == max(0, result["total"] - tn) // 5
        assert result["failure_margins"] == max(0, tn - result["total"]) // 5


def nexus_test_promises(intent: Intent, result: dict[str, Any]) -> None:
    assert result["success_level"] in {"blunder", "failure", "weak", "strong", "critical"}
    assert result["success"] is (result["success_level"] in {"weak", "strong", "critical"})
    assert result["difference"] == result["total"] - result["tn"]
    if "tn" in intent:
        assert result["tn"] == intent["tn"]
    elif "difficulty" not in intent:
        assert result["tn"] == 8
    assert result["d6_used"] in result["d6"]
    assert all(1 <= v <= 6 for v in result["d6"])


def nexus_check_promises(intent: Intent, result: dict[str, Any]) -> None:
    kind = intent["kind"]
    if kind == "durability":
        assert result["outcome"] in {"ok", "damaged", "destroyed"}
        assert (result["outcome"] == "destroyed") <= bool(intent.get("damaged"))
    elif kind == "supply":
        steps = ["d12", "d10", "d8", "d6", "d4", "1", "gone"]
        assert result["outcome"] in steps
        assert steps.index(result["outcome"]) - steps.index(intent["die"]) in {0, 1}
    else:
        entry = result["outcome"]
        assert entry["from"] <= result["value"] <= entry["to"]
        assert isinstance(entry["outcome"], str)


def faces_promises(intent: Intent, result: dict[str, Any]) -> None:
    asked = [g["faces"] for g in intent["dice"] for _ in range(g["number"])]
    assert [d["faces"] for d in result["dice"]] == asked
    assert all(1 <= d["value"] <= d["faces"] and d["kept"] for d in result["dice"])
    assert result["total"] is None


PROMISES = {
    "drawsteel.power": drawsteel_power_promises,
    "drawsteel.ability": drawsteel_ability_promises,
    "daggerheart.duality": daggerheart_duality_promises,
    "daggerheart.attack": daggerheart_attack_promises,
    "honors_edge.roll": honors_edge_promises,
    "honors_edge.skill": honors_edge_promises,
    "honors_edge.damage": honors_edge_promises,
    "nexus.test": nexus_test_promises,
    "nexus.check": nexus_check_promises,
    "faces": faces_promises,
}


def check_plain_data(result: dict[str, Any]) -> None:
    packed = msgpack.packb(result)
    assert msgpack.unpackb(packed) == result
    assert json.loads(json.dumps(result, allow_nan=False)) == result


@pytest.mark.parametrize("system", SYSTEMS)
def test_valid_intents_resolve_to_the_common_shape(system: str) -> None:
    @settings(suppress_health_check=[HealthCheck.too_slow])
    @given(VALID[system])
    def check(value: Intent) -> None:
        result = timed_resolve(value)
        check_shape(system, result)
        check_plain_data(result)
        PROMISES[system](value, result)

    check()


@pytest.mark.parametrize("system", SYSTEMS)
def test_junk_raises_nothing_but_rules_errors(system: str) -> None:
    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(junk_intent(system))
    def check(value: Any) -> None:
        refusal: RulesError | None = None
        try:
            result = timed_resolve(value)
        except RulesError as error:
            refusal = error
        if refusal is not None:
            assert refusal.code in CODES, refusal.code
            assert isinstance(refusal.message, str)
            assert refusal.message
            assert "Traceback" not in refusal.message
            return
        # Some junk is still a valid intent (a dropped optional argument, say): it must then be a result.
        assert isinstance(value, dict)
        check_shape(value["system"], result)
        check_plain_data(result)

    check()


def test_every_spec_system_is_covered_here() -> None:
    # Only 'dice' is tested elsewhere; a new system must get strategies here.
    assert set(rules.systems()) - {"dice"} == set(VALID)


def test_nan_and_huge_numbers_are_refused_cleanly() -> None:
    for bad in (math.nan, math.inf, 10**100, -(10**100), 2**63):
        for system, name in [
            ("drawsteel.power", "bonus"),
            ("honors_edge.roll", "bonus"),
            ("nexus.test", "bonus"),
        ]:
            extra = {"pool": "2k1"} if system == "honors_edge.roll" else {}
            if system == "nexus.test":
                extra = {"attribute_die": "d6"}
            with pytest.raises(RulesError) as caught:
                resolve({"system": system, name: bad, **extra}, rng=DICE)
            assert caught.value.code in {"bad_type", "out_of_range"}
