// tablerelay for Foundry VTT: the module's entry (module.json's esmodules).
import { TableRelayModule } from "./module.mjs";

// In Foundry the globals are the module's env (FoundryEnv in module.mjs). fvtt-types declares them as `let`s and
// classes, which TypeScript leaves off `typeof globalThis`, so the checker is told.
const env = /** @type {import("./module.mjs").FoundryEnv} */ (/** @type {unknown} */ (globalThis));
const tablerelay = new TableRelayModule(env);
Hooks.once("init", () => tablerelay.init());
Hooks.once("ready", () => tablerelay.ready());
