// tablerelay for Foundry VTT: the module's entry (module.json's esmodules).
import { TableRelayModule } from "./module.mjs";

const tablerelay = new TableRelayModule(globalThis);
Hooks.once("init", () => tablerelay.init());
Hooks.once("ready", () => tablerelay.ready());
