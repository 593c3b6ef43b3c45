// Who posts each message, so that a game with several bridges shows every event once.
//
// Every bridge in the room receives the same events, in the same order, with the same member list, so each
// can work out on its own who should post. The relay does not say which members run a Roll20 bridge (a
// member may be a /table page or a bot), so the rule has two steps:
//   1. the primary poster posts at once: the event's actor (the roller, or whoever revealed), except for
//      the full whisper of a blind roll, which only the GMs hold: then the first connected GM;
//   2. bridges set to post "all I may see" stand by as fallbacks, GMs first, then the others, in the order
//      they joined; the n-th waits n × fallbackDelay, looks for the event's tag in Roll20's chat (Roll20
//      shows every bridge's message to everyone it is for), and posts only if it is not there yet.
// A bridge set to "mine" posts only as the primary poster.

/** @typedef {import("../../js/tablerelay.d.ts").Member} Member */
/** @typedef {import("./chatline.js").Post} Post */

/**
 * The members who hold a post in the form it needs: everyone for public lines, the roll's audience for
 * the full whisper of a hidden roll.
 * @param {Post} post
 * @param {{ visibility: string, actor: { id: string } }} event
 * @param {Member[]} members
 */
export function holders(post, event, members) {
  if (post.slot !== "whisper") return members;
  if (event.visibility === "blind") return members.filter((m) => m.role === "gm");
  return members.filter((m) => m.role === "gm" || m.id === event.actor.id);
}

/**
 * The primary poster's participant id for a post, or null when nobody connected holds it.
 * @param {Post} post
 * @param {{ visibility: string, actor: { id: string } }} event
 * @param {Member[]} members
 */
export function primaryPoster(post, event, members) {
  const able = holders(post, event, members);
  if (able.some((m) => m.id === event.actor.id)) return event.actor.id;
  return able.find((m) => m.role === "gm")?.id ?? null;
}

/**
 * When this bridge should post: `{ at: 0 }` at once as the primary, `{ at: ms, check: true }` as a fallback
 * that first looks for the post in the chat, or null when it should not post at all.
 * @param {Post} post
 * @param {{ visibility: string, actor: { id: string } }} event
 * @param {Member[]} members the room's connected members when the event arrived
 * @param {{ id: string }} me
 * @param {{ post: "mine" | "all", fallbackDelay: number }} settings
 * @returns {{ at: number, check: boolean } | null}
 */
export function schedule(post, event, members, me, settings) {
  const primary = primaryPoster(post, event, members);
  if (primary === me.id) return { at: 0, check: false };
  if (settings.post !== "all") return null;
  const standby = holders(post, event, members).filter((m) => m.id !== primary && m.role !== "spectator");
  // GMs first: in most games the GM runs a bridge and is the natural fallback.
  standby.sort((a, b) => Number(b.role === "gm") - Number(a.role === "gm"));
  let rank = standby.findIndex((m) => m.id === me.id);
  // Not in the member list (it changed under us): stand last rather than not at all.
  if (rank < 0) rank = standby.length;
  return { at: (rank + 1) * settings.fallbackDelay, check: true };
}
