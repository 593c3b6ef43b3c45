"""The cheating relay (tests/fairness/cheating_relay.py) on the wire, without the JS client: each cheat really
changes what a witness sent, or what was announced, and a roll whose witness value was dropped or replaced
still passes every offline check (``relay.fairness.verify_fair`` and the spec-only verifier): only the
witness's own client can tell, which is what clients/js/test/witnessing.test.mjs and
tests/browser/test_fairness.py hold it to. The product never imports the launcher."""

from __future__ import annotations

import ast
import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from relay.core.fairness import pending_commit
from relay.fairness import verify_fair
from tests import spec_fairness
from tests.browser.relay_process import ROOT, Relay, WireClient, running_relay
from tests.fairness import cheating_relay

D20 = {"system": "dice", "formula": "1d20+3"}


@contextlib.contextmanager
def cheating(cheat: str, tmp_path: Path) -> Iterator[Relay]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLERELAY_")}
    env.update(TABLERELAY_FAIR_DICE="true", TABLERELAY_WITNESS_WAIT_MS="5000")
    with running_relay(tmp_path / "data", env=env, command=cheating_relay.command(cheat, tmp_path)) as relay:
        yield relay


class Witness(WireClient):
    """A player whose hello offers to witness (``WireClient`` says hello without it)."""

    def __init__(self, ws_url: str, token: str, name: str) -> None:
        self._stack = contextlib.ExitStack()
        self.conn = self._stack.enter_context(connect(ws_url, open_timeout=10))
        self.send({"t": "hello", "v": 1, "token": token, "name": name, "witness": True})
        self.events: list[dict[str, Any]] = []
        self.welcome = self.expect("welcome")
        self._prefix, self._ids = "witness", 0

    def next_event(self, kind: str) -> dict[str, Any]:
        while True:
            frame = self.expect("event")
            if frame["kind"] == kind:
                return frame


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cheat", "offline"),
    [("honest", "fair"), ("drop", "unwitnessed"), ("replace", "fair"), ("reroll", "failed")],
)
def test_each_cheat_changes_what_was_witnessed_and_only_some_show_offline(
    cheat: str, offline: str, tmp_path: Path
) -> None:
    with cheating(cheat, tmp_path) as relay:
        room = relay.create_room(f"Cheat {cheat}")
        gm = WireClient(relay.ws_url, room["gm"], "Mercer")
        ana = Witness(relay.ws_url, room["player"], "Ana")
        try:
            gm.send({"t": "roll", "id": "g1", "intent": D20, "visibility": "public", "label": "GM's roll"})
            pending = ana.next_event("pending")
            assert pending["asked"] == [ana.welcome["you"]["id"]]
            value = os.urandom(16)
            ana.send({"t": "witness", "id": "w1", "pending": pending["seq"], "value": value})
            acked = ana.expect("ack")
            assert acked == {"t": "ack", "id": "w1", "seq": pending["seq"]}, "acknowledged as an honest one"
            roll = ana.next_event("roll")
            assert gm.expect("ack")["seq"] == roll["seq"]
            gm.request({"t": "seed", "op": "reveal"})
        finally:
            gm.close()
            ana.close()
    fair = roll["fair"]
    sent = {ana.welcome["you"]["id"]: value}
    carried = {pid: bytes(v) for pid, v in fair["witnesses"]}
    announced = pending_commit(roll["intent"], roll["label"], fair["nonce"]) == pending["commit"]
    assert fair["pending"] == pending["seq"]
    assert (carried == sent, announced) == {
        "honest": (True, True),
        "drop": (False, True),
        "replace": (False, True),
        "reroll": (True, False),
    }[cheat], (carried, sent, announced)
    if cheat == "drop":
        assert carried == {}
    if cheat == "replace":
        assert list(carried) == list(sent)
    events = gm.events
    verdicts = verify_fair(events, room["room"])
    assert verdicts[roll["seq"]].verdict == offline, verdicts[roll["seq"]]
    assert spec_fairness.verdicts(events, room["room"])[roll["seq"]] == offline


@pytest.mark.slow
def test_unasked_leaves_the_first_witness_out(tmp_path: Path) -> None:
    with cheating("unasked", tmp_path) as relay:
        room = relay.create_room("Cheat unasked")
        gm = WireClient(relay.ws_url, room["gm"], "Mercer")
        ana = Witness(relay.ws_url, room["player"], "Ana")
        bo = Witness(relay.ws_url, room["player"], "Bo")
        try:
            gm.send({"t": "roll", "id": "g1", "intent": D20, "visibility": "public"})
            pending = bo.next_event("pending")
            assert pending["asked"] == [bo.welcome["you"]["id"]], "Ana, the first to offer, is not asked"
            bo.send({"t": "witness", "id": "w1", "pending": pending["seq"], "value": os.urandom(16)})
            assert ana.next_event("roll")["fair"]["pending"] == pending["seq"]
        finally:
            for client in (gm, ana, bo):
                client.close()


def test_the_launcher_refuses_an_unknown_cheat_and_the_product_never_imports_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cheating_relay.main([]) == 2
    assert cheating_relay.main(["fair-enough", "serve"]) == 2
    assert "usage: python -m tests.fairness.cheating_relay {honest,drop," in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown cheat"):
        cheating_relay.install("fair-enough")
    imports = []
    for folder in ("relay", "rules"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "_served" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                imports += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert imports == []
