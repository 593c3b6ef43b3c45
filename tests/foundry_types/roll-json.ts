/**
 * The JSON that Foundry VTT's `Roll#toJSON` writes (v12/v13) and `Roll.fromData` reads, assembled from
 * foundry-vtt-types' own definitions of each part.
 *
 * Why assembled: the package types `Roll#toJSON()` as holding class instances (`DiceTerm[]`, `RollTerm[]`)
 * and `Roll.Data` as the pre-v10 shape (a `results` array, terms without `class`), so neither describes the
 * plain JSON. Every field type below is the package's type for that part (a term's `options`, a die's
 * `results`, an operator's symbol, a roll's `options`, …); what is ours is only the nesting (where a term holds
 * a `Roll`, its JSON holds that roll's JSON, as `toJSON` writes it) and that the fields `toJSON` always writes
 * are required. Two deliberate widenings: a die's options may hold the targets of the `ms` modifier (see
 * `MarginOptions`), and pool modifiers are strings like a die's, because `PoolTerm.TermData["modifiers"]` lists
 * bare modifier names (`"kh"`) while Foundry stores them as written (`"kh2"`).
 *
 * Computed dice (`(1d4)d6`, `1d(2*3)`): `DiceTerm#toJSON` writes `number` and `faces` through their getters, so
 * they stay numbers (the inner rolls' totals, as `TermData` types them), and adds the inner `Roll`s' JSON as
 * `_number` and `_faces`, which `DiceTerm._fromData` turns back into rolls. The package types those two members
 * as `number | Roll`; `ComputedJSON` keeps only their `Roll` side, as JSON.
 */

type Terms = typeof foundry.dice.terms;
type RollTerm = Terms["RollTerm"];
type DiceTermNS = foundry.dice.terms.DiceTerm.TermData;

/**
 * `Die#marginSuccess` (the `ms` modifier) stores its target in the term's options, where `Die#total` reads
 * it; the package's `RollTerm.Options` lists only `flavor`, so these two keys are added here.
 */
type MarginOptions = { marginSuccess?: number; marginFailure?: number };

/** What every serialised term has: its class name, its options (flavor) and whether it was evaluated. */
type TermCommon<Class extends string> = {
  class: Class;
  options: foundry.dice.terms.RollTerm.Data["options"];
  evaluated: foundry.dice.terms.RollTerm.Data["evaluated"];
};

export type DieResultJSON = foundry.dice.terms.DiceTerm.Result;

/** `_number` / `_faces` of a computed die: present only when that member is a `Roll`, written as its JSON. */
type ComputedJSON = {
  [K in "_number" | "_faces"]?: Extract<foundry.dice.terms.DiceTerm[K], Roll> extends never ? never : RollJSON;
};

export type DiceTermJSON = Omit<TermCommon<"Die" | "FateDie" | "Coin">, "options"> &
  Required<Pick<DiceTermNS, "number" | "faces" | "modifiers">> &
  ComputedJSON & {
    options: TermCommon<string>["options"] & MarginOptions;
    results: DieResultJSON[];
    method?: DiceTermNS["method"];
  };

export type NumericTermJSON = TermCommon<"NumericTerm"> &
  Required<Pick<foundry.dice.terms.NumericTerm.TermData, "number">>;

export type OperatorTermJSON = TermCommon<"OperatorTerm"> & {
  operator: keyof Terms["OperatorTerm"]["PRECEDENCE"];
};

export type ParentheticalTermJSON = TermCommon<"ParentheticalTerm"> & {
  term: NonNullable<foundry.dice.terms.ParentheticalTerm.TermData["term"]>;
  roll: RollJSON;
};

export type FunctionTermJSON = TermCommon<"FunctionTerm"> & {
  fn: foundry.dice.terms.FunctionTerm.Data["fn"];
  terms: NonNullable<foundry.dice.terms.FunctionTerm.TermData["terms"]>;
  rolls: RollJSON[];
  result: NonNullable<foundry.dice.terms.FunctionTerm.TermData["result"]>;
};

export type PoolTermJSON = TermCommon<"PoolTerm"> & {
  terms: foundry.dice.terms.PoolTerm.TermData["terms"];
  modifiers: DiceTermNS["modifiers"];
  rolls: RollJSON[];
  results: foundry.dice.terms.PoolTerm.TermData["results"];
};

export type TermJSON =
  | DiceTermJSON
  | NumericTermJSON
  | OperatorTermJSON
  | ParentheticalTermJSON
  | FunctionTermJSON
  | PoolTermJSON;

type RollToJSON = ReturnType<Roll["toJSON"]>;

/** `Roll#toJSON()` with its terms and inner dice as JSON, and an evaluated (numeric) total. */
export type RollJSON = Omit<RollToJSON, "dice" | "terms" | "total" | "class"> & {
  class: "Roll";
  dice: DiceTermJSON[];
  terms: TermJSON[];
  total: NonNullable<RollToJSON["total"]>;
};

/** ChatMessage creation data, exactly as the package types it. */
export type MessageData = ChatMessage.CreateData;

// Keep the unused aliases honest: they must name real members of the package.
export type _Checked = [RollTerm, Terms["Die"], Terms["FateDie"], Terms["Coin"], Terms["PoolTerm"]];
