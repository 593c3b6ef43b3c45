// Campaign management through the JS client against a real relay: rename, merge, kick, invites, archive,
// and how a client's state and connection follow them (docs/campaigns.md).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { closeAll, connect, createRoom, next, until } from "./helpers.mjs";

after(closeAll);

describe("campaign management", () => {
  test("rename and merge update every client's state; the merged client reconnects as the other", async () => {
    const room = createRoom();
    const gm = await connect(room.gm, { name: "Mercer" });
    const aria = await connect(room.player, { name: "Aria" });
    const stale = await connect(room.player, { name: "Aria 2" });
    await gm.resource("hope", "gain", 4, { participant: aria.you.id });
    await gm.resource("hope", "gain", 1, { participant: stale.you.id });

    const renamed = await gm.rename(aria.you.id, "Aria Vell");
    assert.equal(renamed.kind, "rename");
    assert.equal(renamed.verified, true);
    await until(() => aria.you.name === "Aria Vell", 8000, "aria's own name to follow");

    const merged = await gm.merge(stale.you.id, aria.you.id);
    assert.equal(merged.kind, "merge");
    assert.equal(merged.hope, 5);
    assert.equal(merged.verified, true);
    await until(() => gm.state.hope[aria.you.id] === 5 && !(stale.you.id in gm.state.hope), 8000, "hope to merge");
    // The merged client is closed with 4010 and comes back as Aria by itself.
    await until(() => stale.you?.id === aria.you.id && stale.status === "open", 8000, "the merged client to rejoin");
    assert.equal(stale.you.name, "Aria Vell");
  });

  test("kick closes the client for good; invites() rotates and hands out new tokens", async () => {
    const room = createRoom();
    const gm = await connect(room.gm, { name: "Mercer" });
    const bo = await connect(room.player, { name: "Bo" });
    const closed = next(bo, "close");
    const kicked = await gm.kick(bo.you.id, { reason: "Table full." });
    assert.equal(kicked.kind, "kick");
    const error = await closed;
    assert.equal(error.code, "unauthorized");
    assert.match(error.message, /removed you/);
    assert.equal(bo.status, "closed");

    const current = await gm.invites();
    assert.equal(current.generation, 0);
    const rotated = await gm.invites({ rotate: true });
    assert.equal(rotated.generation, 1);
    assert.notEqual(rotated.player, room.player);
    await assert.rejects(connect(room.player, { name: "Late" }), (err) => err.code === "unauthorized" && /replaced/.test(err.message));
    const fresh = await connect(rotated.player, { name: "Cy" });
    assert.equal(fresh.you.role, "player");

    const denied = await fresh.invites().catch((err) => err);
    assert.equal(denied.code, "forbidden");
  });

  test("archive makes the room read-only, with the archived code", async () => {
    const room = createRoom();
    const gm = await connect(room.gm, { name: "Mercer" });
    const archived = await gm.archive();
    assert.equal(archived.kind, "archive");
    assert.equal(gm.state.archived, true);
    const refused = await gm.roll({ system: "dice", formula: "1d6" }).catch((err) => err);
    assert.equal(refused.code, "archived");
    const watcher = await connect(room.spectator);
    assert.ok(watcher.seq >= archived.seq, "the history is still served");
  });
});
