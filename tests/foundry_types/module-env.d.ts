// What the Foundry module declares to foundry-vtt-types: its settings, its flags and its hook, so tsc checks
// every `game.settings.get("tablerelay", …)` and hook call in clients/foundry/scripts against them.
export {};

declare global {
  interface SettingConfig {
    "tablerelay.relayUrl": string;
    "tablerelay.rolls": "all" | "commands";
    "tablerelay.unreachable": "fallback" | "refuse";
    "tablerelay.showVerified": boolean;
    "tablerelay.token": string;
    "tablerelay.cursor": object;
  }
}
