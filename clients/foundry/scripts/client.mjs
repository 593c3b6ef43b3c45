// The thin JS client (clients/js). In the module's zip this file is rewritten to import the client copied
// beside it (lib/tablerelay.mjs), since a Foundry module cannot resolve the repository's layout.
export {
  TableRelay,
  TableRelayError,
  decodeMsgpack,
  ed25519Verify,
  eventPageUrl,
  importKeys,
  openSignedBytes,
  signedBytes,
  verifyCommitment,
  verifyEvent,
} from "../../js/tablerelay.js";

// The client's types (clients/js/tablerelay.d.ts) the module's JSDoc names, so the module's other files never
// reach into the repository's layout themselves.
/** @typedef {import("../../js/tablerelay.js").Intent} Intent */
/** @typedef {import("../../js/tablerelay.js").KeySet} KeySet */
/** @typedef {import("../../js/tablerelay.js").Format} Format */
/** @typedef {import("../../js/tablerelay.js").FairnessAlarm} FairnessAlarm */
