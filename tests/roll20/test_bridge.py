"""The bridge's behaviour in Roll20's chat, for both builds (the extension and the userscript), with real
Chromium, a real relay process and the stand-in Roll20 editor page (fake_roll20/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from rules.render import to_roll20
from tests.browser.relay_process import Relay, WireClient
from tests.roll20.conftest import Table, has_tag, settings_for, tag_of, until

pytestmark = pytest.mark.slow

FALLBACK_MS = 200
# With two bridges standing by, the second waits one fallback delay longer than the first and then looks
# for the first one's post in the chat: the delay must exceed the time a post takes to reach the other
# player's page (through the stand-in's server and its polling), with room for a loaded test machine.
TWO_FALLBACKS_MS = 700


def posted_for(sent: list[str], tag: str) -> list[str]:
    """The messages a player's bridge sent for one event (its tag, escaped as the bridge writes it)."""
    escaped = tag.replace("#", "&#35;")
    return [t for t in sent if escaped + "}}" in t or escaped + " [" in t]


def test_an_event_from_another_client_is_posted_once_with_the_relays_numbers(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    gm = table.join("Gwen", gm=True, settings=settings_for(relay, room["gm"], "all", FALLBACK_MS))
    expect(gm.badge()).to_have_text("connected", timeout=10_000)
    ana = wire(room["player"], "Ana")  # a player without the bridge: the GM's bridge posts for her
    label = "Sneak [past] {{the}} guards | @{x} ?{q}"
    event = ana.roll({"system": "daggerheart.duality", "modifier": 2, "difficulty": 14}, label=label)
    tag = tag_of(room, event["epoch"], event["seq"])
    assert len(gm.wait_shown(has_tag(tag))) == 1
    table.wait(2.5 * FALLBACK_MS / 1000)
    assert len(gm.wait_shown(has_tag(tag), count=2, timeout=0.5)) == 1
    # Exactly the renderer's line for this result and label, plus the Relay field.
    [line] = posted_for(gm.sent, tag)
    expected = to_roll20(event["result"], label=label)["chat"]
    assert line.startswith(expected + " {{Relay="), line
    # Roll20 shows the relay's total in its roll box and rolls nothing itself.
    total = str(event["result"]["total"])
    assert gm.rolled_by_roll20() == 0
    page = gm.page
    assert page is not None
    boxes = page.locator("#textchat .message .inlinerollresult")
    expect(boxes).to_have_count(1)
    expect(boxes.first).to_have_text(total)
    expect(page.locator("#textchat .message caption").last).to_have_text(label)


def test_a_tr_command_is_intercepted_rolled_by_the_relay_and_posted(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    ana = table.join("Ana", settings=settings_for(relay, room["player"]))
    expect(ana.badge()).to_have_text("connected", timeout=10_000)
    watcher = wire(room["gm"], "Gwen")
    ana.type_in_chat("!tr 4d6kh3 -- Stats")
    rolled = watcher.expect("event")
    while rolled.get("kind") != "roll":
        rolled = watcher.expect("event")
    assert rolled["intent"] == {"system": "dice", "formula": "4d6kh3", "dialect": "roll20"}
    assert rolled["label"] == "Stats"
    assert rolled["actor"]["id"] == ana_id(rolled)
    tag = tag_of(room, rolled["epoch"], rolled["seq"])
    assert len(ana.wait_shown(has_tag(tag))) == 1
    # The send button too, and a system roll with typed arguments.
    ana.type_in_chat("!tr drawsteel.power characteristic=2 edges=1", press_enter=False)
    second = watcher.expect("event")
    while second.get("kind") != "roll":
        second = watcher.expect("event")
    assert second["intent"] == {"system": "drawsteel.power", "characteristic": 2, "edges": 1}
    assert len(ana.wait_shown(has_tag(tag_of(room, second["epoch"], second["seq"])))) == 1
    # Roll20's own send handler never saw a command: only the bridge's posts reached it.
    assert not [t for t in ana.sent if t.startswith("!")], ana.sent
    assert len(ana.sent) == 2
    assert ana.rolled_by_roll20() == 0
    # A command the bridge cannot read stays out of Roll20 too and says why in the overlay.
    ana.type_in_chat("!tr drawsteel.power characteristic")
    page = ana.page
    assert page is not None
    expect(page.locator("#tablerelay-overlay .message.error")).to_contain_text("key=value")
    assert len(ana.sent) == 2


def ana_id(event: dict[str, Any]) -> str:
    return str(event["actor"]["id"])


def test_a_gm_roll_is_posted_only_as_a_whisper_and_sealed_for_everyone_else(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    ana = table.join("Ana", settings=settings_for(relay, room["player"], "all", TWO_FALLBACKS_MS))
    bob = table.join("Bob", settings=settings_for(relay, room["player"], "all", TWO_FALLBACKS_MS))
    for p in (ana, bob):
        expect(p.badge()).to_have_text("connected", timeout=10_000)
    gm = wire(room["gm"], "Gwen")
    ana.type_in_chat("!trgm honors_edge.roll pool=6k3 tn=20 -- The secret door")
    hidden = gm.expect("event")
    while hidden.get("kind") != "roll":
        hidden = gm.expect("event")
    assert hidden["visibility"] == "gm"
    assert hidden["label"] == "The secret door"
    seq, epoch = hidden["seq"], hidden["epoch"]
    whisper_tag = tag_of(room, epoch, seq, "gm")
    sealed_tag = tag_of(room, epoch, seq, "sealed")
    # Ana (the roller) posts the full roll as a whisper to the GM and a sealed line in public.
    [whisper] = until(table, lambda: posted_for(ana.sent, whisper_tag), what="Ana's whisper")
    assert whisper.startswith("/w gm &{template:default} {{name=The secret door}}")
    assert f"{{{{Total=[[{hidden['result']['total']}]]}}}}" in whisper
    [sealed] = until(table, lambda: posted_for(ana.sent, sealed_tag), what="Ana's sealed line")
    assert not sealed.startswith("/w")
    assert hidden["commitment"] in sealed.replace(" ", "")
    # Bob sees the sealed line once (Ana's), never the whisper, and his bridge posted nothing for it.
    assert len(bob.wait_shown(has_tag(sealed_tag))) == 1
    table.wait(2.5 * TWO_FALLBACKS_MS / 1000)
    assert len(bob.wait_shown(has_tag(sealed_tag), count=2, timeout=0.3)) == 1
    assert not [m for m in bob.shown() if m["whisper"]]
    assert bob.sent == []
    # Nothing of the hidden roll reached Bob's page: not the label, the dice, the total or the text.
    secrets = ["The secret door", hidden["result"]["text"], hidden["result"]["formula"]]
    shown = bob.shown_text() + "".join(m["body"] for m in bob.shown())
    for secret in secrets:
        assert secret not in shown, secret
    # Revealed: posted once, in public, with the commitment check.
    reveal = gm.reveal(seq)
    reveal_tag = tag_of(room, epoch, reveal["seq"])
    assert len(bob.wait_shown(has_tag(reveal_tag))) == 1
    table.wait(2.5 * TWO_FALLBACKS_MS / 1000)
    opened = bob.wait_shown(has_tag(reveal_tag), count=2, timeout=0.3)
    assert len(opened) == 1
    assert "The secret door" in opened[0]["body"]
    assert "matches the commitment" in opened[0]["body"]
    assert ana.rolled_by_roll20() == 0
    assert bob.rolled_by_roll20() == 0


def test_a_hidden_roll_from_a_player_without_the_bridge_reaches_only_the_gm(
    table: Table, relay: Relay, room: dict[str, str], wire: Callable[..., WireClient]
) -> None:
    gwen = table.join("Gwen", gm=True, settings=settings_for(relay, room["gm"], "all", TWO_FALLBACKS_MS))
    bob = table.join("Bob", settings=settings_for(relay, room["player"], "all", TWO_FALLBACKS_MS))
    for p in (gwen, bob):
        expect(p.badge()).to_have_text("connected", timeout=10_000)
    cara = wire(room["player"], "Cara")
    hidden = cara.roll(
        {"system": "nexus.test", "attribute_die": "d10", "skill_rank": 1}, "blind", "Listen at the door"
    )
    seq, epoch = hidden["seq"], hidden["epoch"]
    # Cara has no bridge: the GM's bridge posts the whisper (only GMs hold a blind roll) and the sealed line.
    whisper_tag = tag_of(room, epoch, seq, "gm")
    sealed_tag = tag_of(room, epoch, seq, "sealed")
    assert len(gwen.wait_shown(has_tag(whisper_tag))) == 1
    assert len(bob.wait_shown(has_tag(sealed_tag))) == 1
    table.wait(2.5 * TWO_FALLBACKS_MS / 1000)
    assert len(gwen.wait_shown(has_tag(sealed_tag), count=2, timeout=0.3)) == 1
    assert len(posted_for(gwen.sent, whisper_tag)) == 1
    assert posted_for(gwen.sent, whisper_tag)[0].startswith("/w gm ")
    assert bob.sent == [], "Bob's bridge holds only the sealed placeholder and stood by for the GM"
    shown = bob.shown_text() + "".join(m["body"] for m in bob.shown())
    assert "Listen at the door" not in shown
    assert not [m for m in bob.shown() if m["whisper"]]
