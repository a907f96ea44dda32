// Shared by the live checks: serves the harness page on 127.0.0.1, launches Chromium, pairs pages
// with a running bridge (its home given), and unpairs them at the end.
import { build } from "esbuild";
import { createServer } from "node:http";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, "..", "..", "..", ".venv", "bin", "codedeck-bridge");

export async function start(home) {
  const bundle = await build({ entryPoints: [join(here, "harness.ts")], bundle: true, format: "esm", write: false, target: "es2022" });
  const js = bundle.outputFiles[0].text;
  const server = createServer((req, res) => {
    if (req.url === "/harness.js") {
      res.writeHead(200, { "content-type": "text/javascript" });
      res.end(js);
    } else {
      res.writeHead(200, { "content-type": "text/html" });
      res.end('<!doctype html><script type="module" src="/harness.js"></script>');
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const origin = `http://127.0.0.1:${server.address().port}/`;
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const paired = [];
  return {
    browser,
    origin,
    paired,
    pairLink() {
      const out = execFileSync(cli, ["--home", home, "pair", "--json", "--timeout", "300"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
      return "#" + JSON.parse(out).webUrl.split("#")[1];
    },
    cli(...args) {
      return execFileSync(cli, ["--home", home, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    },
    async page(context) {
      const page = await (context ?? (await browser.newContext())).newPage();
      page.on("console", (m) => console.log(`[page ${m.type()}] ${m.text().slice(0, 300)}`));
      await page.goto(origin);
      await page.waitForFunction(() => globalThis.core !== undefined);
      return page;
    },
    async close() {
      for (const npub of paired) execFileSync(cli, ["--home", home, "unpair", npub], { stdio: "ignore" });
      await browser.close();
      server.close();
    },
  };
}
