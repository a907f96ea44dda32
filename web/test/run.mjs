// `npm test`: bundles each test/*.test.ts with esbuild (the sources are TypeScript) into a
// temporary folder and runs them with `node --test`. Needs nothing but node and node_modules.
import { build } from "esbuild";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const tests = readdirSync(here).filter((name) => name.endsWith(".test.ts")).sort();
const out = mkdtempSync(join(tmpdir(), "codedeck-web-test-"));
try {
  await build({
    entryPoints: tests.map((name) => join(here, name)),
    outdir: out,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    logLevel: "warning",
    define: { "import.meta.dirname": JSON.stringify(here) },
  });
  const files = tests.map((name) => join(out, name.replace(/\.ts$/, ".mjs")));
  const result = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
  process.exitCode = result.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
