// tablerelay: a thin client for the tablerelay dice relay (wire protocol version 1).
//
// ES modules for browsers and Node 20+, with no build step: this entry and its parts in src/, imported by
// relative paths. The only dependency is @msgpack/msgpack; in a browser map the bare specifier with an
// import map, in Node it resolves from node_modules. Types: tablerelay.d.ts.
//
//   import { TableRelay } from "tablerelay";
//   const table = new TableRelay("wss://relay.example/ws", token);
//   table.on("roll", (event) => console.log(event.actor.name, event.result?.text ?? "(sealed)"));
//   await table.connect();
//   const event = await table.roll({ system: "drawsteel.power", characteristic: 2, edges: 1 });
//
// Every event is checked against the server's Ed25519 signature (docs/verification.md): `event.verified`
// is true, or false with `event.verifyError` saying why. With a server rolling fair dice, every roll frame
// carries 16 fresh bytes as its `seed`, every roll gets `event.verdict`, the client answers the pending
// events that ask it to witness a roll, and anything amiss raises an `alarm` (docs/fairness.md). Where
// WebCrypto lacks Ed25519 the client imports @noble/ed25519 (map it too in a browser's import map).
//
// The parts:
//   src/protocol.js      protocol version, event kinds, TableRelayError, MessagePack, the event page address
//   src/signing.js       the signed form of an event: canonical MessagePack, signedBytes, openSignedBytes
//   src/verification.js  signatures (WebCrypto, else @noble/ed25519), the server's keys, reveals' commitments
//   src/state.js         the room's state (Fear, Hope, members) from welcomes and events
//   src/connection.js    the socket: hello and resume, backoff, heartbeat, requests in flight
//   src/fairness.js      fair dice (spec/fairness.md): roller seeds, seed commitments, the HMAC stream, verdicts
//   src/witness.js       witnessing: answering pending events, and the alarms that hold the relay to them
//   src/client.js        TableRelay: receiving and delivering events, the requests

import { TableRelay } from "./src/client.js";

export { TableRelay };
export { EVENT_KINDS, PROTOCOL_VERSION, TableRelayError, decodeMsgpack, encodeMsgpack, eventPageUrl } from "./src/protocol.js";
export { CLIENT_FIELDS, UNSIGNED_KEYS, canonicalEncode, openSignedBytes, signedBytes } from "./src/signing.js";
export {
  FairDice,
  SeedBook,
  VERDICTS,
  newRollerSeed,
  outsideContribution,
  pendingCommit,
  rollKey,
  rollTranscript,
  seedCommit,
  streamProblem,
} from "./src/fairness.js";
export { ed25519Verify, importKeys, verifyCommitment, verifyEvent } from "./src/verification.js";
export { DEFAULT_WITNESS_MARGIN_MS, DEFAULT_WITNESS_WAIT_MS, WitnessBook, isWitnessed, newWitnessValue } from "./src/witness.js";

export default TableRelay;
