// Types for tablerelay.js, the thin client for the tablerelay dice relay (wire protocol version 1).
//
// Integers: an integer that fits a JS number exactly (|n| ≤ 2^53 − 1) is a `number`; any larger one
// arrives as a `bigint` and is never rounded. Where the protocol says "int", the type below is `Int`.

export type Int = number | bigint;

export declare const PROTOCOL_VERSION: 1;
export declare const EVENT_KINDS: readonly ["roll", "reveal", "resource", "join", "leave"];

export type Role = "gm" | "player" | "spectator";
export type Visibility = "public" | "gm" | "blind" | "self";
export type Format = "foundry" | "roll20";
export type ResourceName = "fear" | "hope";
export type ResourceOp = "gain" | "spend" | "set";

/** Codes the server sends, plus the client's own: disconnected, closed, timeout, gap. */
export type ErrorCode =
  | "bad_frame"
  | "bad_intent"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "insufficient"
  | "rate_limited"
  | "conflict"
  | "internal"
  | "archived"
  | "removed"
  | "disconnected"
  | "closed"
  | "timeout"
  | "gap"
  | (string & {});

export interface Actor {
  id: string;
  name: string;
  role: Role;
}

export interface Member extends Actor {
  [extra: string]: unknown;
}

export interface RoomState {
  fear: Int;
  /** Hope per participant id. */
  hope: Record<string, Int>;
  members: Member[];
  /** Set once an `archive` event arrived: the room is read-only. */
  archived?: boolean;
}

/** A roll intent (see docs/rules.md): `system` picks the rules, every other key is an argument. */
export interface Intent {
  system: string;
  [argument: string]: unknown;
}

/** One die in a result: faces, value, kept, plus the system's marks ("role", "exploded", "chain"…). */
export interface Die {
  faces: Int;
  value: Int;
  kept: boolean;
  role?: string;
  exploded?: boolean;
  chain?: Int[];
  [mark: string]: unknown;
}

export interface Effect {
  resource: ResourceName;
  delta: Int;
}

/** A rules result (docs/rules.md); every system adds its own fields. */
export interface RollResult {
  system: string;
  dice: Die[];
  total: Int | null;
  formula: string;
  text: string;
  effects?: Effect[];
  requires?: Partial<Record<ResourceName, Int>>;
  [field: string]: unknown;
}

interface EventBase {
  seq: number;
  epoch: string;
  /** Milliseconds since the Unix epoch. */
  ts: number;
  actor: Actor;
  visibility: Visibility;
  /** The id of the server key that signed this event (a JWK's `kid` in the welcome's `keys`). */
  kid: string;
  /** Ed25519 signature (64 bytes) over `signedBytes(event, roomId)`; see docs/verification.md. */
  sig: Uint8Array;
  /**
   * Added by the client (unless `verify: false`): true when the signature checks out with the server's
   * keys (or the pinned `keys` option), false when it does not; then `verifyError` says why.
   */
  verified?: boolean;
  /** Added by the client when `verified` is false: a sentence saying what failed. */
  verifyError?: string;
}

/** A roll's verdict from the client's fairness check (spec/fairness.md, docs/fairness.md). */
export type Verdict = "awaiting seed" | "fair" | "unwitnessed" | "sealed" | "failed";

/**
 * A roll's `fair` map (signed by the server): the dice seed `n` it used, the roller's seed (unwitnessed rolls),
 * the pending event's seq and nonce and the witness values (witnessed rolls), and every die drawn in order.
 */
export interface FairMap {
  n: Int;
  seed: Uint8Array | null;
  pending: Int | null;
  nonce: Uint8Array | null;
  witnesses: [string, Uint8Array][];
  draws: [Int, Int][];
}

/** What a sealed placeholder carries of a roll's `fair` map. */
export interface SealedFairMap {
  n: Int;
  pending: Int | null;
  witnesses: [string, Uint8Array][];
}

/** Added by the client to every roll that carries a `fair` map (none on a server without fair dice). */
interface Judged {
  /**
   * "awaiting seed" until the roll's dice seed is revealed (for good when the seed was abandoned unrevealed:
   * a room moved without its secret); then "fair" (recomputed, and someone outside the
   * server contributed: a player's roller seed or a witness), "unwitnessed" (recomputed, nobody outside
   * contributed) or "failed"; "sealed" for a hidden roll not revealed yet. Listen to "verdict" for changes.
   */
  verdict?: Verdict;
  /** A sentence explaining the verdict (why it failed, which seed it waits for). */
  verdictReason?: string;
}

/** A roll you may see: the full event. */
export interface OpenRollEvent extends EventBase, Judged {
  kind: "roll";
  /** With fair dice on: what the dice were drawn from (spec/fairness.md). */
  fair?: FairMap;
  sealed?: false;
  label?: string;
  intent: Intent;
  result: RollResult;
  /** Hidden rolls (visibility other than public) carry their commitment in full form too. */
  commitment?: string;
  /** The seq of the reveal that opened this roll, on rolls replayed after their reveal. */
  revealed?: number;
  /** Present when the hello asked for the format. */
  foundry?: Record<string, unknown>;
  roll20?: { rollresult: Record<string, unknown>; chat: string };
}

/** A roll outside your audience: only that it happened and the commitment that will prove its reveal. */
export interface SealedRollEvent extends EventBase, Judged {
  kind: "roll";
  sealed: true;
  fair?: SealedFairMap;
  /** Hex SHA-256 of nonce ‖ blob. */
  commitment: string;
}

export type RollEvent = OpenRollEvent | SealedRollEvent;

export interface RevealEvent extends EventBase {
  kind: "reveal";
  /** The seq of the sealed roll it opens. */
  of: number;
  /** The MessagePack bytes of the roll's full event body. */
  blob: Uint8Array;
  nonce: Uint8Array;
  /** Added by the client: the decoded blob (the full roll event body), or null if it did not decode. */
  roll: OpenRollEvent | null;
  /**
   * Added by the client: true when SHA-256(nonce ‖ blob) equals the commitment this client received with
   * the roll (and the blob's seq is the one revealed), false when it does not, null when this client never
   * received that roll's commitment (the roll is older than the history it was given). The reveal's own
   * signature is `verified`, as on every event.
   */
  commitmentVerified: boolean | null;
}

export interface ResourceEvent extends EventBase {
  kind: "resource";
  name: ResourceName;
  participant?: string;
  delta: Int;
  value: Int;
  /** The seq of the roll that caused it, once that roll is public. */
  cause?: number | null;
}

export interface MemberEvent extends EventBase {
  kind: "join" | "leave";
  member: Member;
}

/** The GM's campaign management (docs/campaigns.md). */
export interface CampaignEvent extends EventBase {
  kind: "rename" | "merge" | "kick" | "invites" | "archive";
  /** rename: the member with its new name; kick: the member removed. */
  member?: Member;
  /** rename: the old name. */
  was?: string;
  /** merge: the participant folded away, the one it became, and that one's Hope after. */
  merged?: Member;
  into?: Member;
  hope?: Int | null;
  /** kick: the GM's reason, if any. */
  reason?: string | null;
  /** invites: the invite generation now valid. */
  generation?: Int;
}

export type TableEvent = CampaignEvent;

export interface Invites {
  generation: Int;
  player: string;
  spectator: string;
  links: { player: string; spectator: string };
  /** The rotation's event, when this request rotated. */
  seq?: number;
}

/** A dice seed committed (its hex SHA-256 commitment) and, later, revealed (the 32-byte seed). */
export interface SeedCommitEvent extends EventBase {
  kind: "seed_commit";
  n: Int;
  commit: string;
}

export interface SeedRevealEvent extends EventBase {
  kind: "seed_reveal";
  n: Int;
  seed: Uint8Array;
}

/** A witnessed roll announced (spec/fairness.md): who is asked for random bytes before it is made. */
export interface PendingEvent extends EventBase {
  kind: "pending";
  /** The participant who rolls. */
  roller: string;
  /** The seed it will use. */
  n: Int;
  /** The participant ids asked to witness it, sorted (at most 16). */
  asked: string[];
  /** Hex SHA-256 binding its intent and label to a secret nonce the roll reveals. */
  commit: string;
  /** What its roll will spend (a tablerelay addition), held from every other spend until the roll is made:
   * Fear, or the roller's Hope. Absent when it spends nothing. */
  holds?: { fear?: Int; hope?: Int };
}

/** A fairness alarm: a seed reveal that does not match its commitment, a roll that fails its check, a roll
 * that uses a revealed seed, this client's own roller seed or witness value left out or replaced, a roll that
 * is not the one its pending event announced (or names none this client received, or a second roll for one),
 * a pending with no roll in time, or a witnessed roll this client was not offered (docs/fairness.md). */
export interface FairnessAlarm {
  message: string;
  /** The event that raised it (a roll, or a seed event), when there is one. */
  seq: number | null;
  event: RelayEvent | null;
}

export type RelayEvent = RollEvent | RevealEvent | ResourceEvent | MemberEvent | CampaignEvent | SeedCommitEvent | SeedRevealEvent | PendingEvent;

export interface Welcome {
  t: "welcome";
  room: { id: string; name: string; fear_max?: number; hope_max?: number };
  you: Actor;
  session: string;
  epoch: string;
  seq: number;
  state: RoomState;
  history: RelayEvent[];
  recovered: boolean;
  /** The server's published signing keys (current and retired), as /.well-known/tablerelay-keys.json. */
  keys: Jwk[];
  /** With fair dice on: the room's open dice seed, once one is committed. */
  seed?: { n: Int; commit: string };
  /** With fair dice on: the commitments of every seed from the oldest one the history's rolls use. */
  seeds?: { n: Int; commit: string }[];
  /** With fair dice on: how long a witnessed roll waits for its witnesses (a tablerelay addition). */
  witness_wait_ms?: number;
}

/** An Ed25519 public key as the server publishes it (RFC 7517, RFC 8037). */
export interface Jwk {
  kty: "OKP";
  crv: "Ed25519";
  /** The raw 32-byte public key, base64url without padding. */
  x: string;
  /** The first 16 hex digits of SHA-256 over the raw public key. */
  kid: string;
  use?: "sig";
  alg?: "EdDSA";
  /** Unix ms when the key was rotated out; it still verifies the events it signed. */
  retired?: number;
}

/** A JWK Set, a list of JWKs, or the Map `importKeys` returns. */
export type KeySet = { keys: Jwk[] } | Jwk[] | Map<string, { x: Uint8Array; retired?: number }>;

export type Verification = { verified: true } | { verified: false; reason: string };

export interface DeliveryInfo {
  /** True for the backlog of a fresh welcome (events from before this connection); false for news. */
  replay: boolean;
}

export type Status = "idle" | "connecting" | "open" | "reconnecting" | "closed";

export interface WebSocketLike {
  readonly readyState: number;
  binaryType: string;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (event: any) => void): void;
}

export interface TableRelayOptions {
  /** A WebSocket constructor; defaults to globalThis.WebSocket (pass `ws` in Node 20). */
  WebSocket?: new (url: string) => WebSocketLike;
  /** Display name sent in the hello. */
  name?: string;
  /** Renderings to receive with each roll. */
  formats?: Format[];
  /** A session token from an earlier welcome: rejoin as that participant (falls back to `token` if refused). */
  session?: string | null;
  /** Reconnect after a drop (default true). */
  reconnect?: boolean;
  /** Backoff: first delay and ceiling in ms (defaults 250 and 10000; each wait is jittered to 50–100%). */
  minDelay?: number;
  maxDelay?: number;
  /** Heartbeat ping every this many ms while idle (default 25000; 0 turns it off). */
  pingInterval?: number;
  /** A heartbeat without a pong after this many ms forces a reconnect (default 10000). */
  pingTimeout?: number;
  /** Check every event's signature (default true); see `event.verified`. */
  verify?: boolean;
  /**
   * Keys to trust instead of those the server announces in its welcome: pin the server's key set
   * (fetched once from /.well-known/tablerelay-keys.json) so a server with another key is caught.
   */
  keys?: KeySet | null;
  /** Offer to witness GM and hidden rolls (default true): pending events that ask are answered by themselves. */
  witness?: boolean;
  /** How long past the relay's `witness_wait_ms` a pending may wait for its roll before the alarm (default 5000). */
  witnessMarginMs?: number;
}

export interface RollOptions {
  visibility?: Visibility;
  /** Shown with the roll to its audience (≤ 200 characters). */
  label?: string;
  /** The request id and idempotency key; generated when absent. */
  id?: string;
  /**
   * The roller seed (16 to 64 bytes) to send; by default 16 fresh bytes from the CSPRNG, the same for every
   * send of the same id. Pass the bytes of a first attempt when retrying its id from a new client.
   */
  seed?: Uint8Array;
}

export declare class TableRelayError extends Error {
  constructor(code: ErrorCode, message: string, details?: { id?: string; closeCode?: number });
  readonly code: ErrorCode;
  /** The request id the error answers, when it answers one. */
  readonly id?: string;
  readonly closeCode?: number;
}

interface Listeners {
  roll: (event: RollEvent, info: DeliveryInfo) => void;
  reveal: (event: RevealEvent, info: DeliveryInfo) => void;
  resource: (event: ResourceEvent, info: DeliveryInfo) => void;
  join: (event: MemberEvent, info: DeliveryInfo) => void;
  leave: (event: MemberEvent, info: DeliveryInfo) => void;
  event: (event: RelayEvent, info: DeliveryInfo) => void;
  welcome: (welcome: Welcome, info: { fresh: boolean }) => void;
  state: (state: RoomState) => void;
  status: (status: Status) => void;
  error: (error: TableRelayError) => void;
  close: (error: TableRelayError) => void;
  seed_commit: (event: SeedCommitEvent, info: DeliveryInfo) => void;
  seed_reveal: (event: SeedRevealEvent, info: DeliveryInfo) => void;
  pending: (event: PendingEvent, info: DeliveryInfo) => void;
  /** A reconnect is scheduled: after `delay` ms (jittered), step `attempt` of the backoff, and why. */
  backoff: (wait: { delay: number; attempt: number; reason: string }) => void;
  /** A roll's verdict changed after it was delivered (its seed was revealed, or the hidden roll was). */
  verdict: (event: OpenRollEvent | SealedRollEvent) => void;
  /** Something in the room's dice is wrong; show it. */
  alarm: (alarm: FairnessAlarm) => void;
}

export declare class TableRelay {
  /** `url`: one address, or several relay nodes of a cluster (each reconnect tries the next). */
  constructor(url: string | string[], token: string, options?: TableRelayOptions);
  /** The address in use, or tried next. */
  readonly url: string;
  /** Every address the client may connect to, in the order it tries them. */
  readonly urls: readonly string[];
  readonly token: string;
  readonly status: Status;
  readonly room: { id: string; name: string } | null;
  readonly you: Actor | null;
  readonly session: string | null;
  readonly epoch: string | null;
  /** The seq of the last event delivered to listeners. */
  readonly seq: number;
  readonly state: RoomState;
  /** The server's published signing keys, from the last welcome. */
  readonly keys: Jwk[];

  connect(): Promise<Welcome>;
  close(): void;
  reconnectNow(): void;

  on<K extends keyof Listeners>(type: K, fn: Listeners[K]): () => void;
  once<K extends keyof Listeners>(type: K, fn: Listeners[K]): () => void;
  off<K extends keyof Listeners>(type: K, fn: Listeners[K]): void;

  roll(intent: Intent, options?: RollOptions): Promise<RollEvent>;
  reveal(seq: number): Promise<RevealEvent>;
  /** GM only: reveal the room's open dice seed now; resolves with the `seed_reveal` event. */
  revealSeed(): Promise<SeedRevealEvent>;
  /** The fairness alarms raised so far (the last 100), oldest first. */
  readonly alarms: readonly FairnessAlarm[];
  /** Whether the hello offers to witness rolls (the `witness` option). */
  readonly witness: boolean;
  resource(name: ResourceName, op: ResourceOp, n: Int, options?: { participant?: string }): Promise<ResourceEvent>;
  /** GM only: rename a participant. */
  rename(participant: string, name: string): Promise<TableEvent>;
  /** GM only: fold `participant` into `into` (Hope adds up to the cap). */
  merge(participant: string, into: string): Promise<TableEvent>;
  /** GM only: remove a participant (its sockets close with 4003, its tokens stop working). */
  kick(participant: string, options?: { reason?: string }): Promise<TableEvent>;
  /** GM only: the room's invite tokens and links; `rotate: true` replaces the old ones first. */
  invites(options?: { rotate?: boolean }): Promise<Invites>;
  /** GM only: make the room read-only. */
  archive(): Promise<TableEvent>;
  /** Resolves with the round trip in ms. */
  ping(options?: { timeout?: number }): Promise<number>;
  /** One of the last 1000 events, by seq. */
  event(seq: number): RelayEvent | undefined;
}

export declare function verifyCommitment(nonce: Uint8Array, blob: Uint8Array, commitment: string): Promise<boolean>;

/** Keys an event carries that its signature does not cover: t, sig, kid, foundry, roll20. */
export declare const UNSIGNED_KEYS: readonly string[];
/** Fields the client adds to events (verified, verifyError, roll, commitmentVerified); never signed. */
export declare const CLIENT_FIELDS: readonly string[];
/** Canonical MessagePack (spec/signing.md); throws a TypeError on a number with a fraction. */
export declare function canonicalEncode(value: unknown): Uint8Array;
/** The exact bytes an event's signature covers, for the room it was received in. */
export declare function signedBytes(event: object, roomId: string): Uint8Array;
/** What `signedBytes` made, read back: the room id and the event; null for bytes not of that form. */
export declare function openSignedBytes(bytes: Uint8Array): { room: string; event: Record<string, unknown> } | null;
/** The relay's page of one event (`/events/ROOM/SEQ`), from its ws(s) address. */
export declare function eventPageUrl(relayUrl: string, roomId: string, seq: number): string;
/** Check one event (as received, or as stored later with its kid and sig) against a key set. */
export declare function verifyEvent(event: object, roomId: string, keys: KeySet): Promise<Verification>;
/** Public keys by kid; JWKs whose kid does not match their key are left out. */
export declare function importKeys(keys: KeySet): Promise<Map<string, { x: Uint8Array; retired?: number }>>;
/** Ed25519 verification: WebCrypto where available, else @noble/ed25519. */
export declare function ed25519Verify(publicKey: Uint8Array, signature: Uint8Array, message: Uint8Array): Promise<boolean>;
/** The verdict names. */
export declare const VERDICTS: {
  readonly AWAITING: "awaiting seed";
  readonly FAIR: "fair";
  readonly UNWITNESSED: "unwitnessed";
  readonly SEALED: "sealed";
  readonly FAILED: "failed";
};
/** 16 fresh bytes from the platform CSPRNG. */
export declare function newRollerSeed(): Uint8Array;
/** A seed_commit's `commit`: hex SHA-256(b"tablerelay-seed-v1\0" + room + b"\0" + u64be(n) + seed). */
export declare function seedCommit(room: string, n: Int, seed: Uint8Array): Promise<string>;
/** A pending event's `commit`: hex SHA-256(b"tablerelay-pending-v1\0" + canonical({intent, label, nonce})). */
export declare function pendingCommit(intent: unknown, label: string | null | undefined, nonce: Uint8Array): Promise<string>;
/** The transcript a roll's key is derived from, from its full event. */
export declare function rollTranscript(room: string, event: object): Record<string, unknown>;
/** K = HMAC(seed, b"tablerelay-fair-v1\0" + canonical(transcript)). */
export declare function rollKey(seed: Uint8Array, transcript: object): Promise<Uint8Array>;
/** The dice of a roll key: the HMAC word stream with rejection (spec/fairness.md). */
export declare class FairDice {
  constructor(key: Uint8Array);
  readonly draws: [Int, Int][];
  roll(faces: Int): Promise<Int>;
}
/** Whether someone outside the operator's side contributed to a roll. */
export declare function outsideContribution(fair: object, roller: string, rollerIsGm: boolean): boolean;
/** null when the roll's draws are what its revealed seed gives; else a sentence naming the first that is not. */
export declare function streamProblem(room: string, event: object, seed: Uint8Array): Promise<string | null>;
/** What a client knows of a room's dice seeds; `TableRelay` keeps one. */
export declare class SeedBook {
  constructor();
  check(room: string, event: object): Promise<string | null>;
  seedCommitted(event: SeedCommitEvent): string | null;
  seedRevealed(room: string, event: SeedRevealEvent): Promise<{ alarm: string | null; updated: RollEvent[] }>;
  noteOpen(seed: { n: Int; commit: string } | undefined): string | null;
  reset(epoch: string | null): void;
}
/** The `witness_wait_ms` a welcome that names none implies (250), and the default `witnessMarginMs` (5000). */
export declare const DEFAULT_WITNESS_WAIT_MS: number;
export declare const DEFAULT_WITNESS_MARGIN_MS: number;
/** 16 fresh bytes from the platform CSPRNG: a witness value. */
export declare function newWitnessValue(): Uint8Array;
/** Whether a roll is witnessed when witnesses are online: hidden, or made by a GM. */
export declare function isWitnessed(roll: object): boolean;
/** Who this client is, for the witness checks. */
export interface WitnessSelf {
  id: string | undefined;
  role: Role | undefined;
  witness: boolean;
}
/**
 * One client's witnessing of one room (`TableRelay` keeps one): the pendings it saw, the values it sent, and
 * the checks that hold the relay to them. Its methods return alarm sentences.
 */
export declare class WitnessBook {
  constructor(hooks: { fail: (roll: object, reason: string) => void; overdue: (seq: number) => void });
  waitMs: number;
  marginMs: number;
  reset(epoch: string | null): void;
  welcome(frame: Welcome, fresh: boolean): void;
  disconnected(): void;
  arm(): void;
  disarm(): void;
  pending(event: PendingEvent, me: WitnessSelf): string[];
  toAnswer(me: WitnessSelf): { seq: number; value: Uint8Array }[];
  answered(seq: number, answer: string): void;
  overdue(seq: number): string | null;
  roll(event: RollEvent, me: WitnessSelf): Promise<string[]>;
  revealed(roll: object, me: WitnessSelf): Promise<string | null>;
}
export declare function decodeMsgpack(bytes: Uint8Array): unknown;
export declare function encodeMsgpack(value: unknown): Uint8Array;

export default TableRelay;
