// Builds CodeDeck Web into the Python package (bridge/webclient/static/), so `make run` needs only
// Python. The build is deterministic: the same sources and lockfile give the same bytes, which the
// test tier checks (tests/webclient/test_shipped_is_built.py).
//   node build.mjs            -> writes bridge/webclient/static/
//   node build.mjs --out DIR  -> writes DIR instead (the check builds into a temp folder)
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const outArg = process.argv.indexOf("--out");
const out = outArg > 0 ? resolve(process.argv[outArg + 1]) : join(here, "..", "bridge", "webclient", "static");

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
cpSync(join(here, "public"), out, { recursive: true });

const common = {
  bundle: true,
  minify: true,
  legalComments: "none",
  target: ["es2022", "chrome110", "safari16.4", "firefox115"],
  charset: "utf8",
  logLevel: "warning",
  jsx: "automatic",
  jsxImportSource: "preact",
};
await build({ ...common, entryPoints: [join(here, "src", "main.tsx")], format: "esm", outfile: join(out, "app.js") });
await build({ ...common, entryPoints: [join(here, "src", "sw.ts")], format: "iife", outfile: join(out, "sw.js") });
// The stylesheet is copied with the public files, then replaced by its minified form.
await build({
  entryPoints: [join(here, "public", "app.css")], minify: true, charset: "utf8", logLevel: "warning",
  target: common.target, outfile: join(out, "app.css"), allowOverwrite: true,
});
