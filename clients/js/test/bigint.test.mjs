// Integers beyond JavaScript's exact range: never rounded, in either direction.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { decodeMsgpack, encodeMsgpack } from "../tablerelay.js";
import { closeAll, connect, createRoom } from "./helpers.mjs";

after(closeAll);

test("decoding: int64/uint64 outside ±(2^53 − 1) become exact BigInts, the rest stay numbers", () => {
  // Hand-written MessagePack so the bytes do not depend on our own encoder.
  const u64max = Uint8Array.from([0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
  assert.equal(decodeMsgpack(u64max), 2n ** 64n - 1n);
  const i64min = Uint8Array.from([0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(decodeMsgpack(i64min), -(2n ** 63n));
  const twoTo53 = Uint8Array.from([0xcf, 0, 0x20, 0, 0, 0, 0, 0, 0]);
  assert.equal(decodeMsgpack(twoTo53), 2n ** 53n); // 2^53 itself is the first integer a double can confuse
  const maxSafe = Uint8Array.from([0xcf, 0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
  assert.equal(decodeMsgpack(maxSafe), Number.MAX_SAFE_INTEGER);
  const ts = encodeMsgpack({ ts: 1_763_000_000_000, nested: [{ n: -5 }] });
  assert.deepEqual(decodeMsgpack(ts), { ts: 1_763_000_000_000, nested: [{ n: -5 }] });
});

test("encoding: BigInts go out as exact int64/uint64", () => {
  const big = 2n ** 63n - 1n;
  const bytes = encodeMsgpack({ n: big, m: -(2n ** 63n) });
  assert.deepEqual(decodeMsgpack(bytes), { n: big, m: -(2n ** 63n) });
});

test("the largest exact total arrives as that exact number", async () => {
  const player = await connect(createRoom().player);
  const event = await player.roll({ system: "dice", formula: "9007199254740990 + 1" });
  assert.equal(event.result.total, Number.MAX_SAFE_INTEGER);
  assert.equal(typeof event.result.total, "number");
});

test("a BigInt in an intent reaches the server exactly (its refusal quotes every digit)", async () => {
  const player = await connect(createRoom().player);
  const huge = 2n ** 63n - 1n; // 9223372036854775807: as a double it would read …5808
  await assert.rejects(player.roll({ system: "daggerheart.duality", modifier: huge }), (err) => {
    assert.equal(err.code, "bad_intent");
    assert.ok(err.message.includes("9223372036854775807"), err.message);
    return true;
  });
  const unsigned = 2n ** 64n - 1n;
  await assert.rejects(player.roll({ system: "daggerheart.duality", modifier: unsigned }), (err) =>
    err.message.includes("18446744073709551615"),
  );
  const negative = -(2n ** 62n) - 3n;
  await assert.rejects(player.roll({ system: "daggerheart.duality", modifier: negative }), (err) =>
    err.message.includes("-4611686018427387907"),
  );
});
