// Builds the bridge from src/: the Manifest V3 extension for Chromium and for Firefox, and the userscript.
//
//   node build.mjs [--out DIR] [--extra-match PATTERN ...]
//
// DIR (default dist/) receives chromium/ and firefox/ (load either unpacked) and tablerelay-roll20.user.js.
// --extra-match adds a content-script match pattern; the browser tests use it for their local stand-in of
// Roll20's editor page. Built files are never checked in (.gitignore).

import { build } from "esbuild";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const pkg = JSON.parse(await readFile(join(here, "package.json"), "utf8"));

function options(argv) {
  const out = { dir: join(here, "dist"), extraMatches: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") out.dir = resolve(argv[++i]);
    else if (argv[i] === "--extra-match") out.extraMatches.push(argv[++i]);
    else throw new Error(`unknown option ${argv[i]}`);
  }
  return out;
}

// Roll20's editor, where the chat lives (Beyond20 matches the same page).
const ROLL20_MATCHES = ["https://app.roll20.net/editor*"];
const NAME = "tablerelay for Roll20";
const DESCRIPTION = "Brings tablerelay's server-rolled dice into a Roll20 game's chat, and rolls from the chat with !tr.";

function manifest(browser, matches) {
  const base = {
    manifest_version: 3,
    name: NAME,
    version: pkg.version,
    description: DESCRIPTION,
    permissions: ["storage"],
    action: { default_title: "tablerelay", default_popup: "popup.html" },
    content_scripts: [{ matches, js: ["content.js"], run_at: "document_idle" }],
  };
  if (browser === "firefox") {
    return {
      ...base,
      // Firefox runs MV3 background scripts as event pages, not service workers.
      background: { scripts: ["background.js"] },
      browser_specific_settings: { gecko: { id: "roll20@tablerelay", strict_min_version: "115.0" } },
    };
  }
  return { ...base, background: { service_worker: "background.js" }, minimum_chrome_version: "111" };
}

function userscriptHeader(matches) {
  const lines = [
    "// ==UserScript==",
    `// @name         ${NAME}`,
    "// @namespace    https://github.com/tablerelay/tablerelay",
    `// @version      ${pkg.version}`,
    `// @description  ${DESCRIPTION}`,
    ...matches.map((m) => `// @match        ${m}`),
    "// @grant        GM_getValue",
    "// @grant        GM_setValue",
    "// @grant        GM.getValue",
    "// @grant        GM.setValue",
    "// @grant        GM_registerMenuCommand",
    "// @run-at       document-idle",
    "// @noframes",
    "// ==/UserScript==",
  ];
  return lines.join("\n");
}

const common = {
  bundle: true,
  format: "iife",
  target: ["chrome111", "firefox115"],
  legalComments: "none",
  logLevel: "warning",
  // @msgpack/msgpack is the JS client's dependency; resolve it from there.
  nodePaths: [join(here, "..", "js", "node_modules")],
};

export async function buildAll(argv = []) {
  const { dir, extraMatches } = options(argv);
  const matches = [...ROLL20_MATCHES, ...extraMatches];
  await rm(dir, { recursive: true, force: true });
  for (const browser of ["chromium", "firefox"]) {
    const out = join(dir, browser);
    await mkdir(out, { recursive: true });
    await build({
      ...common,
      entryPoints: {
        content: join(here, "src/extension/content.js"),
        background: join(here, "src/extension/background.js"),
        popup: join(here, "src/extension/popup.js"),
      },
      outdir: out,
    });
    await copyFile(join(here, "src/extension/popup.html"), join(out, "popup.html"));
    await writeFile(join(out, "manifest.json"), `${JSON.stringify(manifest(browser, matches), null, 2)}\n`);
  }
  await build({
    ...common,
    entryPoints: [join(here, "src/userscript/main.js")],
    outfile: join(dir, "tablerelay-roll20.user.js"),
    banner: { js: userscriptHeader(matches) },
  });
  return dir;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const started = Date.now();
  const dir = await buildAll(process.argv.slice(2));
  console.log(`built ${dir} in ${Date.now() - started} ms`);
}
