// What this browser has already posted, per room and epoch, so a reload never posts an event twice.
//
// The record lives in the bridge's storage under `posted:<room>:<epoch>`: the keys of the messages posted
// (`12`, `12s`, `12w`, see chatline.js) and `upTo`, the last seq this bridge has dealt with. After a
// reload the relay replays the room's recent history; events up to `upTo` were dealt with before, and the
// ones after it are the gap to catch up on. A room seen for the first time has no record: its history is
// the past, and nothing of it is posted.

/** @typedef {import("./storage.js").Store} Store */

// Keys kept per room: a long session posts thousands; the oldest ones can no longer come back in a resume.
const KEEP = 2000;

export class PostedLog {
  /**
   * @param {Store} store
   * @param {string} roomId
   * @param {string} epoch
   */
  constructor(store, roomId, epoch) {
    this.store = store;
    this.key = `posted:${roomId}:${epoch}`;
    /** @type {{ upTo: number, keys: string[] } | null} */
    this.record = null;
    this.known = false; // whether this room+epoch had a record before this page
    this._writing = Promise.resolve();
  }

  async load() {
    const saved = await this.store.get(this.key);
    if (saved && typeof saved.upTo === "number" && Array.isArray(saved.keys)) {
      this.record = { upTo: saved.upTo, keys: saved.keys.filter((k) => typeof k === "string") };
      this.known = true;
    } else {
      this.record = { upTo: 0, keys: [] };
    }
    return this;
  }

  get upTo() {
    return this.record?.upTo ?? 0;
  }

  /** @param {string} key */
  has(key) {
    return Boolean(this.record?.keys.includes(key));
  }

  /** Remember a posted message; resolves once it is stored. */
  add(key) {
    if (!this.record || this.has(key)) return this._writing;
    this.record.keys.push(key);
    if (this.record.keys.length > KEEP) this.record.keys.splice(0, this.record.keys.length - KEEP);
    return this._save();
  }

  /** Everything up to `seq` has been dealt with (posted, scheduled, or not ours to post). */
  through(seq) {
    if (!this.record || seq <= this.record.upTo) return this._writing;
    this.record.upTo = seq;
    return this._save();
  }

  /** Re-read what another tab of the same extension may have posted meanwhile. */
  async refresh() {
    const saved = await this.store.get(this.key);
    if (saved && Array.isArray(saved.keys) && this.record) {
      for (const k of saved.keys) if (!this.record.keys.includes(k)) this.record.keys.push(k);
      this.record.upTo = Math.max(this.record.upTo, Number(saved.upTo) || 0);
    }
  }

  _save() {
    const snapshot = { upTo: this.record?.upTo ?? 0, keys: [...(this.record?.keys ?? [])] };
    this._writing = this._writing.then(() => this.store.set(this.key, snapshot));
    return this._writing;
  }
}
