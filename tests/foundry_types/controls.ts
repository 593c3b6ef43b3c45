/**
 * Negative controls: data the checker must refuse. Each line carries `@ts-expect-error`, so if the types
 * ever stop catching the mistake, tsc reports the directive as unused and the test fails.
 */
import type { MessageData, RollJSON, TermJSON } from "./roll-json";

const die: TermJSON = {
  class: "Die", options: {}, evaluated: true, number: 1, faces: 20, modifiers: [], results: [{ result: 7, active: true }],
};
const three: RollJSON = {
  class: "Roll", options: {}, dice: [], formula: "3", total: 3, evaluated: true,
  terms: [{ class: "NumericTerm", options: {}, evaluated: true, number: 3 }],
};

export const controls: unknown[] = [
  // @ts-expect-error a face must be a number
  { ...die, results: [{ result: "7", active: true }] } satisfies TermJSON,
  // @ts-expect-error a misspelt result flag is not a result flag
  { ...die, results: [{ result: 7, active: true, droped: true }] } satisfies TermJSON,
  // @ts-expect-error "**" is no Foundry operator
  { class: "OperatorTerm", options: {}, evaluated: true, operator: "**" } satisfies TermJSON,
  // @ts-expect-error a term needs its class
  { options: {}, evaluated: true, number: 3 } satisfies TermJSON,
  // @ts-expect-error a roll needs its formula
  { class: "Roll", options: {}, dice: [], terms: [die], total: 7, evaluated: true } satisfies RollJSON,
  // A computed die (`(3)d20`) is accepted: its number stays a number, its inner roll goes in `_number`.
  { ...die, number: 3, _number: three } satisfies TermJSON,
  // @ts-expect-error a computed die's number is the inner roll's total, not the roll (that is `_number`)
  { ...die, number: three } satisfies TermJSON,
  // @ts-expect-error `_faces` holds the inner roll's JSON, not its total
  { ...die, _faces: 20 } satisfies TermJSON,
  // @ts-expect-error a ChatMessage stores its rolls as JSON strings, not objects
  { rolls: [{ class: "Roll" }] } satisfies MessageData,
  // @ts-expect-error whisper holds user ids, which are strings
  { whisper: [42] } satisfies MessageData,
  // @ts-expect-error blind is a boolean
  { blind: "yes" } satisfies MessageData,
];
