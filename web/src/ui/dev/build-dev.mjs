// Builds the UI against the in-memory registry into a folder of your choice (default /tmp/h4dev)
// for screenshots and UI tests: node src/ui/dev/build-dev.mjs [outdir]. Never shipped.
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const web = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const out = resolve(process.argv[2] ?? "/tmp/h4dev");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
cpSync(join(web, "public"), out, { recursive: true });
const common = { bundle: true, minify: true, legalComments: "none", target: ["es2022"], jsx: "automatic", jsxImportSource: "preact", logLevel: "warning" };
await build({ ...common, entryPoints: [join(web, "src", "ui", "dev", "main-dev.tsx")], format: "esm", outfile: join(out, "app.js") });
await build({ ...common, entryPoints: [join(web, "src", "sw.ts")], format: "iife", outfile: join(out, "sw.js") });
console.log(out);
