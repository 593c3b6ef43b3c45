// What the Foundry module (clients/foundry/scripts) adds to Foundry, declared to foundry-vtt-types the ways its
// src/configuration documents: its settings (`SettingConfig`), the flags it writes on Users and ChatMessages
// (`FlagConfig`), its `api` on its Module entry (`ModuleConfig`, `RequiredModules`), the option it sets on a
// Roll (`foundry.dice.Roll.Options`), its hook (`Hooks.StaticCallbacks`), and when it runs (`AssumeHookRan`).
// With these, tsc checks every `game.settings.get("tablerelay", …)`, flag, hook and API use in the module
// against them (tests/test_foundry_module_types.py). The types the module defines itself (its API, message
// flags, roll context) are imported from its files, so the code stays their one source.
//
// tsconfig.json's `*.ts` includes this file in the renderings project too; nothing here changes those checks.
// Both projects set skipLibCheck, which also skips this file and fvtt-types' own checks of these declarations
// (src/types/config.d.mts); tests/test_foundry_module_types.py runs those with skipLibCheck off.

import type { DeliveryInfo, RelayEvent } from "../../clients/js/tablerelay.js";
import type { RollContext } from "../../clients/foundry/scripts/fulfillment.mjs";
import type { MessageFlags } from "../../clients/foundry/scripts/messages.mjs";
import type { TableRelayModule } from "../../clients/foundry/scripts/module.mjs";

/** What the module keeps per browser so a reload rejoins as the same participant and resumes (client scope). */
// A type alias, not an interface: a setting's object type must be a plain object (fvtt-types' AnyObject).
type TableRelayCursor = {
  /** The last characters of the token the session and cursor belong to. */
  key?: string;
  session?: string | null;
  epoch?: string;
  seq?: number;
};

declare module "fvtt-types/configuration" {
  // The module reaches Foundry only from its init hook (settings, CONFIG, hooks, its Module entry) and from
  // callbacks that run after ready (relay events, chat, rolls, forms), so `ui` is the initialized one.
  interface AssumeHookRan {
    ready: never;
  }

  interface SettingConfig {
    "tablerelay.relayUrl": string;
    "tablerelay.rolls": "all" | "commands";
    "tablerelay.unreachable": "fallback" | "refuse";
    "tablerelay.showVerified": boolean;
    "tablerelay.daggerheartRolls": boolean;
    "tablerelay.drawSteelRolls": boolean;
    "tablerelay.token": string;
    "tablerelay.cursor": TableRelayCursor;
    // The Daggerheart system's Fear (registered by that system, type Number), which the module mirrors from
    // the relay while that system is active.
    "daggerheart.ResourcesFear": number;
    /** The Daggerheart system's automation settings; the module reads whether its Hope and Fear automation is on. */
    "daggerheart.Automation": { hopeFear?: { gm?: boolean; players?: boolean } };
  }

  interface FlagConfig {
    User: {
      tablerelay?: {
        /** The relay participant id this user's client joined as (clients/foundry/scripts/audience.mjs). */
        participant?: string;
      };
    };
    ChatMessage: {
      tablerelay?: MessageFlags;
    };
  }

  interface ModuleConfig {
    tablerelay: {
      /** The API for macros and other modules: `game.modules.get("tablerelay").api`. */
      api: TableRelayModule["api"];
    };
  }

  // The module's own code runs only while it is active.
  interface RequiredModules {
    tablerelay: true;
  }

  namespace foundry.dice.Roll {
    interface Options {
      /** Where a roll's faces came from, set while it evaluates through the relay (fulfillment.mjs). */
      tablerelay?: RollContext;
    }
  }
}

declare global {
  interface CONFIG {
    /** The Daggerheart system's configuration, there while that system is active: it names the Fear setting. */
    DH?: { SETTINGS?: { gameSettings?: { Resources?: { Fear?: string } } } };
  }

  namespace Hooks {
    interface StaticCallbacks {
      /** Every relay event this client receives, before the module posts it (Hooks.callAll). */
      "tablerelay.event": (event: RelayEvent, info: DeliveryInfo) => void;
    }
  }
}
