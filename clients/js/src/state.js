// The room's state as a client keeps it: Fear, each participant's Hope and the members, taken from a
// welcome and kept current by the events that change it.

/** Events that change `state` (members, Fear, Hope). */
export const STATE_KINDS = new Set(["resource", "join", "leave", "rename", "merge", "kick", "archive"]);

/**
 * The room's state as a welcome gives it (as of the welcome's seq): a copy, so applying events never
 * changes the frame.
 * @param {object} frame a welcome
 * @returns {{ fear: number|bigint, hope: Record<string, number|bigint>, members: object[] }}
 */
export function welcomeState(frame) {
  return {
    fear: frame.state?.fear ?? 0,
    hope: { ...(frame.state?.hope ?? {}) },
    members: [...(frame.state?.members ?? [])],
  };
}

/**
 * Apply one live event to `state` in place (its `hope` and `members` are replaced, never changed); events of
 * kinds outside STATE_KINDS change nothing.
 * @param {{ fear: number|bigint, hope: Record<string, number|bigint>, members: object[], archived?: true }} state
 * @param {object} event
 */
export function applyToState(state, event) {
  if (event.kind === "resource") {
    if (event.name === "fear") state.fear = event.value;
    else if (event.name === "hope" && event.participant != null) {
      state.hope = { ...state.hope, [event.participant]: event.value };
    }
  } else if (event.kind === "join" || event.kind === "leave") {
    const member = event.member ?? event.actor;
    if (!member) return;
    const others = state.members.filter((m) => m.id !== member.id);
    state.members = event.kind === "join" ? [...others, member] : others;
  } else if (event.kind === "rename" && event.member) {
    state.members = state.members.map((m) => (m.id === event.member.id ? event.member : m));
  } else if (event.kind === "kick" && event.member) {
    state.members = state.members.filter((m) => m.id !== event.member.id);
    const { [event.member.id]: _gone, ...hope } = state.hope;
    state.hope = hope;
  } else if (event.kind === "merge" && event.merged && event.into) {
    state.members = state.members.filter((m) => m.id !== event.merged.id);
    const { [event.merged.id]: _gone, ...hope } = state.hope;
    state.hope = event.hope == null ? hope : { ...hope, [event.into.id]: event.hope };
  } else if (event.kind === "archive") {
    state.members = [];
    state.archived = true;
  }
}
