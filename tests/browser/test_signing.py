"""Signed events in headless Chromium: the JS client verifies real events from a running relay with
WebCrypto's Ed25519 (and with @noble/ed25519 where WebCrypto lacks it); tampering fails; the pages mark
verified events quietly and an altered one loudly."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from playwright.sync_api import Page, WebSocketRoute, expect

from tests.browser.relay_process import Relay

pytestmark = pytest.mark.slow

POWER = {"system": "drawsteel.power", "characteristic": 2, "edges": 1}

# Runs in the page: connect with the real client, take the welcome's history, and try every tampering.
TAMPER_IN_PAGE = """
async ({ url, token }) => {
  const m = await import("/js/tablerelay.js");
  const client = new m.TableRelay(url, token, { reconnect: false });
  const events = [];
  client.on("event", (e) => events.push(e));
  await client.connect();
  const room = client.room.id;
  const keys = client.keys;
  const copy = (v) => m.decodeMsgpack(m.encodeMsgpack(v));
  const skip = new Set([...m.UNSIGNED_KEYS, ...m.CLIENT_FIELDS]);
  function* leaves(value, path = []) {
    if (value instanceof Uint8Array) yield path;
    else if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) yield* leaves(value[i], [...path, i]);
    } else if (value !== null && typeof value === "object") {
      for (const k of Object.keys(value)) yield* leaves(value[k], [...path, k]);
    }
    else yield path;
  }
  const flip = (v) =>
    v instanceof Uint8Array ? Uint8Array.from(v, (b, i) => (i === 0 ? b ^ 1 : b))
    : typeof v === "boolean" ? !v
    : typeof v === "number" ? v ^ 1
    : typeof v === "string" ? (v ? v.slice(0, -1) + String.fromCharCode(v.charCodeAt(v.length - 1) ^ 1) : "x")
    : 0;
  const out = { events: 0, verified: 0, mutations: 0, survived: [], webcrypto: null };
  for (const event of events) {
    out.events++;
    if (event.verified === true && (await m.verifyEvent(event, room, keys)).verified) out.verified++;
    if (event.kind !== "roll" && event.kind !== "reveal") continue;
    const signed = Object.fromEntries(Object.entries(event).filter(([k]) => !skip.has(k)));
    for (const path of leaves(signed)) {
      const changed = copy(event);
      let target = changed;
      for (const step of path.slice(0, -1)) target = target[step];
      target[path[path.length - 1]] = flip(target[path[path.length - 1]]);
      out.mutations++;
      if ((await m.verifyEvent(changed, room, keys)).verified) out.survived.push(`changed ${path.join(".")}`);
    }
    for (const key of Object.keys(signed)) {
      const dropped = copy(event);
      delete dropped[key];
      if ((await m.verifyEvent(dropped, room, keys)).verified) out.survived.push(`dropped ${key}`);
    }
    const otherKid = { ...event, kid: "0000000000000000" };
    if ((await m.verifyEvent(otherKid, room, keys)).verified) out.survived.push("kid");
    if ((await m.verifyEvent(event, room + "x", keys)).verified) out.survived.push("other room");
  }
  try {
    await crypto.subtle.importKey("raw", new Uint8Array(32).fill(1), { name: "Ed25519" }, false, ["verify"]);
    out.webcrypto = true;
  } catch (err) {
    out.webcrypto = String(err);
  }
  client.close();
  return out;
}
"""

# Runs in the page: the same check on a fresh copy of the module with WebCrypto's Ed25519 refused.
NOBLE_IN_PAGE = """
async ({ url, token }) => {
  const subtle = crypto.subtle;
  const importKey = subtle.importKey;
  subtle.importKey = function (format, data, algorithm, ...rest) {
    if ((algorithm?.name ?? algorithm) === "Ed25519") {
      return Promise.reject(new DOMException("no", "NotSupportedError"));
    }
    return importKey.call(this, format, data, algorithm, ...rest);
  };
  const m = await import("/js/tablerelay.js?without-webcrypto-ed25519");
  const client = new m.TableRelay(url, token, { reconnect: false });
  const events = [];
  client.on("event", (e) => events.push(e));
  await client.connect();
  client.close();
  const sig = Uint8Array.from(events[0].sig);
  sig[5] ^= 1;
  const forged = await m.verifyEvent({ ...events[0], sig }, client.room.id, client.keys);
  subtle.importKey = importKey;
  const verified = events.filter((e) => e.verified === true).length;
  return { events: events.length, verified, forged: forged.verified };
}
"""


def test_the_client_in_chromium_verifies_real_events_and_catches_every_tampering(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    gm = wire(room["gm"], "Mercer")
    hidden = gm.roll(POWER, "gm", "The secret door")
    gm.roll(POWER, "public", "Open strike")
    gm.reveal(hidden["seq"])
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{relay.http_url}/watch")
    result = page.evaluate(TAMPER_IN_PAGE, {"url": relay.ws_url, "token": room["spectator"]})
    assert result["webcrypto"] is True, f"this Chromium has no WebCrypto Ed25519: {result['webcrypto']}"
    assert result["events"] >= 4, result
    assert result["verified"] == result["events"], result
    assert result["mutations"] > 30, result
    assert result["survived"] == [], result
    assert not any("noble" in url for url in requested), "noble is loaded only where WebCrypto lacks Ed25519"


def test_without_webcrypto_ed25519_the_page_loads_noble_and_verifies(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    wire(room["gm"], "Mercer").roll(POWER, "public", "Strike")
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(f"{relay.http_url}/watch")
    result = page.evaluate(NOBLE_IN_PAGE, {"url": relay.ws_url, "token": room["spectator"]})
    assert result["events"] >= 2, result
    assert result["verified"] == result["events"], result
    assert result["forged"] is False, result
    assert any("/vendor/noble-ed25519/" in url for url in requested), requested


def test_the_feed_marks_verified_events_quietly_and_an_altered_one_loudly(
    page: Page, relay: Relay, room: dict[str, str], wire: Any
) -> None:
    def tamper(route: WebSocketRoute) -> None:
        # A man in the middle: the relay's frames reach the page, but one roll's total is changed.
        server = route.connect_to_server()

        def to_page(message: str | bytes) -> None:
            if isinstance(message, bytes):
                frame = msgpack.unpackb(message, raw=False)
                if frame.get("t") == "event" and frame.get("label") == "Forged total":
                    frame["result"]["total"] += 10
                    message = msgpack.packb(frame, use_bin_type=True)
            route.send(message)

        server.on_message(to_page)
        route.on_message(lambda message: server.send(message))

    page.route_web_socket("**/ws*", tamper)
    page.goto(f"{relay.http_url}/watch#{room['spectator']}")
    expect(page.locator("#status")).to_have_text("Live", timeout=10_000)
    gm = wire(room["gm"], "Mercer")
    honest = gm.roll(POWER, "public", "Honest total")
    forged = gm.roll(POWER, "public", "Forged total")
    good = page.locator(f'#feed > article[data-seq="{honest["seq"]}"]')
    bad = page.locator(f'#feed > article[data-seq="{forged["seq"]}"]')
    expect(good.locator(".sig-ok")).to_be_visible(timeout=5000)
    expect(good.locator(".sig-warning")).to_have_count(0)
    expect(bad.locator(".sig-warning")).to_be_visible(timeout=5000)
    expect(bad.locator(".sig-warning")).to_contain_text("Not verified")
    expect(bad).to_have_attribute("data-signature", "failed")
    expect(bad.locator(".sig-ok")).to_have_count(0)
