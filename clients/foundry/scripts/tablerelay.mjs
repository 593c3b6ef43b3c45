// tablerelay for Foundry VTT: the module's entry (module.json's esmodules).
import { TableRelayModule } from "./module.mjs";

const tablerelay = new TableRelayModule(/** @type {any} */ (globalThis));
Hooks.once("init", () => tablerelay.init());
Hooks.once("ready", () => tablerelay.ready());
