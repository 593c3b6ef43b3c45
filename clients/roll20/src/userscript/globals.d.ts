// What a userscript manager hands the script (granted in the header that build.mjs writes). They are
// variables of the function the manager wraps the script in, so main.js reads them by name.
declare const GM: { getValue(key: string): Promise<unknown>; setValue(key: string, value: unknown): Promise<void> } | undefined;
declare const GM_getValue: ((key: string) => unknown) | undefined;
declare const GM_setValue: ((key: string, value: unknown) => void) | undefined;
declare const GM_registerMenuCommand: ((caption: string, onClick: () => void) => unknown) | undefined;
