// Dice fulfillment through the relay: every face of a Foundry roll comes from the relay's secure dice.
//
// Foundry (v12+) asks the fulfillment handler for one face at a time, in order, and awaits each answer
// (DiceTerm#roll → #invokeFulfillmentHandler). One request per die would cost a round trip per die, so
// before a roll evaluates, `prefetch` asks the relay once for every face whose number and size are already
// known; the handler then answers from that batch. Dice that only become known while the roll evaluates —
// a computed number like `(1d4)d6`, an explosion, a reroll — are asked for when Foundry reaches them, the
// rest of a term at once. So a roll costs one round trip, plus one for each term of computed size and one
// for each die added by a modifier (docs/foundry.md counts them).

/** The fulfillment method's id in CONFIG.Dice.fulfillment.methods. */
export const METHOD = "tablerelay";

/** Raised (and so the roll refused) when the relay cannot roll and the table chose to refuse. */
export class RelayUnavailable extends Error {
  /** @param {string} reason  why, as the person rolling reads it @param {string} message  the sentence, worded */
  constructor(reason, message) {
    super(message);
    this.name = "RelayUnavailable";
    this.reason = reason;
  }
}

/**
 * @typedef {object} TermLike  the parts of a Foundry DiceTerm this file reads
 * @property {number|undefined|void} number   undefined while a computed number is not evaluated yet
 * @property {number|undefined|void} faces
 * @property {string} denomination
 * @property {Array<unknown>} results
 * @property {(u: number) => number} [mapRandomFace]
 *
 * @typedef {object} RollContext  what a roll carries as `roll.options.tablerelay` (plain JSON)
 * @property {boolean} via         every face came from the relay
 * @property {number[]} seqs       the relay events that hold its faces
 * @property {string} [room]
 * @property {string} [epoch]
 * @property {string} [reason]     why it was not via the relay
 * @property {number} roundTrips
 * @property {import("./messages.mjs").Signature[]} [signatures]  the faces events' signatures, when signed
 * @property {string} [unresolved]  a game system's roll the relay did not resolve (systems/): why
 * @property {import("./messages.mjs").MessageFlags} [event]  a game system's roll the relay resolved
 *   (systems/relayed.mjs): the flags of that relay event, which its message carries
 *
 * @typedef {object} Request  one faces request: the dice and the roll they are for
 * @property {Array<{ number: number, faces: number }>} dice
 * @property {{ formula?: string, visibility: "public"|"gm"|"blind"|"self", label?: string }} about
 *
 * @typedef {object} BrokerDeps
 * @property {(request: Request) => Promise<{ seq: number, values: number[], room?: string, epoch?: string, signature?: import("./messages.mjs").Signature|null }>} request
 * @property {() => boolean} connected
 * @property {() => "fallback"|"refuse"} policy
 * @property {(reason: string) => void} onUnavailable
 * @property {(key: string, data?: Record<string, string>) => string} text  a sentence from its translation key
 *   (lang/en.json), in the language of whoever rolls: game.i18n.format in Foundry
 */

/** Does this term's face come from a die the relay can roll (a positive whole number of faces)? */
function rollable(/** @type {TermLike} */ term) {
  return Number.isInteger(term.faces) && /** @type {number} */ (term.faces) >= 1;
}

/**
 * The result Foundry expects for a face of `term`. A standard die shows the face itself; other die classes
 * (a coin, a Fate die) turn a uniform draw into their own results, so the face is given to their
 * `mapRandomFace` as the middle of its slice of [0, 1): each face maps to exactly one result.
 * @param {TermLike} term
 * @param {number} face  1 … term.faces
 */
export function resultFor(term, face) {
  if (/^d\d+$/.test(term.denomination) || typeof term.mapRandomFace !== "function") return face;
  const faces = /** @type {number} */ (term.faces);
  // "+ 0" turns the -0 a Fate die can map to into 0.
  return term.mapRandomFace((faces - face + 0.5) / faces) + 0;
}

export class FacesBroker {
  /** @param {BrokerDeps} deps */
  constructor(deps) {
    this.deps = deps;
    /** @type {WeakMap<object, number[]>} faces fetched and not yet handed out, per term */
    this.queues = new WeakMap();
    /** @type {WeakMap<object, { context: RollContext, about: Request["about"] }>} the roll each term belongs to */
    this.rolls = new WeakMap();
  }

  /**
   * Before a roll evaluates: ask for every face its relay dice are known to need, in one request.
   * @param {TermLike[]} terms  the roll's dice terms that use this method (nested ones included)
   * @param {Request["about"]} about
   * @returns {Promise<RollContext>}
   */
  async prefetch(terms, about) {
    // An inner roll (the `(1d4)` of `(1d4)d6`) is evaluated by Foundry as a roll of its own, after its outer
    // roll already asked for its dice: it must use those faces, not ask again.
    const enclosing = terms.map((t) => this.rolls.get(t)).find(Boolean);
    if (enclosing) return enclosing.context;
    /** @type {RollContext} */
    const context = { via: true, seqs: [], roundTrips: 0 };
    for (const term of terms) this.rolls.set(term, { context, about });
    const wanted = terms
      .filter((t) => Number.isInteger(t.number) && rollable(t))
      .map((t) => ({ term: t, number: Math.abs(/** @type {number} */ (t.number)) - t.results.length }))
      .filter((w) => w.number > 0);
    if (wanted.length === 0) return context;
    const reply = await this.#ask(
      wanted.map((w) => ({ number: w.number, faces: /** @type {number} */ (w.term.faces) })),
      context,
      about,
    );
    if (reply) {
      let at = 0;
      for (const w of wanted) {
        this.queues.set(w.term, reply.values.slice(at, at + w.number));
        at += w.number;
      }
    }
    return context;
  }

  /**
   * The fulfillment handler: one face for `term`, or undefined to let Foundry roll it (the fallback).
   * @param {TermLike} term
   * @returns {Promise<number|undefined>}
   */
  async face(term) {
    if (!rollable(term)) return undefined;
    let queue = this.queues.get(term);
    if (!queue || queue.length === 0) {
      let owner = this.rolls.get(term);
      if (!owner) {
        // A term Foundry built while evaluating (not in the roll when it started): a roll of its own.
        owner = { context: { via: true, seqs: [], roundTrips: 0 }, about: { visibility: "public" } };
        this.rolls.set(term, owner);
      }
      // Once a roll has fallen back to Foundry's dice it stays there: one roll, one source.
      if (!owner.context.via) return undefined;
      const remaining = Number.isInteger(term.number) ? Math.abs(/** @type {number} */ (term.number)) - term.results.length : 0;
      const reply = await this.#ask([{ number: Math.max(1, remaining), faces: /** @type {number} */ (term.faces) }], owner.context, owner.about);
      if (!reply) return undefined;
      queue = reply.values;
      this.queues.set(term, queue);
    }
    const face = /** @type {number} */ (queue.shift());
    return resultFor(term, face);
  }

  /**
   * @param {Request["dice"]} dice
   * @param {RollContext} context
   * @param {Request["about"]} about
   */
  async #ask(dice, context, about) {
    context.roundTrips += 1;
    if (!this.deps.connected()) return this.#unavailable(context, this.deps.text("TABLERELAY.Reason.NotConnected"));
    let reply;
    try {
      reply = await this.deps.request({ dice, about });
    } catch (err) {
      return this.#unavailable(context, String(/** @type {Error} */ (err)?.message ?? err));
    }
    const asked = dice.reduce((n, d) => n + d.number, 0);
    if (!Array.isArray(reply.values) || reply.values.length !== asked) {
      return this.#unavailable(context, this.deps.text("TABLERELAY.Reason.WrongCount"));
    }
    context.seqs.push(reply.seq);
    if (reply.signature) (context.signatures ??= []).push(reply.signature);
    if (reply.room) context.room = reply.room;
    if (reply.epoch) context.epoch = reply.epoch;
    return reply;
  }

  /** @param {RollContext} context @param {string} reason */
  #unavailable(context, reason) {
    this.deps.onUnavailable(reason);
    if (this.deps.policy() === "refuse") {
      throw new RelayUnavailable(reason, this.deps.text("TABLERELAY.Error.Refused", { reason }));
    }
    context.via = false;
    context.reason = reason;
    return null;
  }
}
