// The UI in Chromium against the in-memory registry (src/ui/dev/fake.ts): every data-testid of the
// contract is on screen where the e2e tier expects it, nothing overflows at 375 px, the page keeps
// to its strict CSP, the fake's hostile transcript stays text, and a 5,000-entry session shows
// every row. Skips when Debian's Chromium is not installed (the e2e tier says how to get it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import type * as Esbuild from "esbuild";
import type * as Playwright from "playwright-core";

type Page = Playwright.Page;

const CHROMIUM = "/usr/bin/chromium";
const WEB = join(import.meta.dirname, "..");
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png", ".webmanifest": "application/manifest+json" };
const BRIDGE = "a1".repeat(32);
// Loaded from web/node_modules at run time: the test runner bundles this file, and neither esbuild
// nor playwright-core can be bundled.
const load = createRequire(join(WEB, "package.json"));

const CONTRACT = [
  "pair-screen", "pair-label", "pair-submit", "pair-error", "bridge-item", "presence", "session-list", "session-item",
  "new-session", "new-session-cwd", "new-session-agent", "new-session-submit", "pending-session", "session-failed",
  "transcript", "entry", "composer-input", "composer-send", "outbox-item", "interrupt", "mode-select", "model-select",
  "effort-select", "card-permission", "card-allow", "card-deny", "card-always", "card-plan", "plan-1", "plan-2", "plan-3",
  "card-question", "question-option", "question-free-text", "question-submit", "context-meter", "usage-cost", "sync-status",
  "attach-image", "upload-progress", "push-enable", "push-status", "back", "manual-pair", "manual-pair-npub",
  "manual-pair-relays", "manual-pair-submit", "my-npub",
];

async function serve(dir: string): Promise<[Server, string]> {
  const server = createServer((req, res) => {
    let path = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    if (path === "/") path = "/index.html";
    const file = join(dir, normalize(path));
    if (!file.startsWith(dir) || !existsSync(file)) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream", "content-security-policy": CSP, "cache-control": "no-store" });
    res.end(readFileSync(file));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("no port");
  return [server, `http://127.0.0.1:${address.port}`];
}

async function overflow(page: Page): Promise<number> {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

test("the UI in Chromium: the test-id contract, 375 px, CSP, hostile text, 5,000 rows", { skip: !existsSync(CHROMIUM) && "no /usr/bin/chromium", timeout: 120_000 }, async () => {
  const { build } = load("esbuild") as typeof Esbuild;
  const { chromium } = load("playwright-core") as typeof Playwright;
  const dir = mkdtempSync(join(tmpdir(), "codedeck-ui-"));
  const common = { bundle: true, minify: true, logLevel: "warning" as const, jsx: "automatic" as const, jsxImportSource: "preact", target: ["es2022"] };
  await build({ ...common, entryPoints: [join(WEB, "src", "ui", "dev", "main-dev.tsx")], format: "esm", outfile: join(dir, "app.js") });
  await build({ ...common, entryPoints: [join(WEB, "src", "sw.ts")], format: "iife", outfile: join(dir, "sw.js") });
  for (const name of ["index.html", "app.css", "icon.svg", "manifest.webmanifest"]) {
    copyFileSync(join(WEB, "public", name), join(dir, name));
  }
  const [server, origin] = await serve(dir);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"] });
  try {
    const context = await browser.newContext({ viewport: { width: 375, height: 812 } });
    await context.addInitScript(() => {
      const w = window as unknown as { __csp: string[] };
      w.__csp = [];
      document.addEventListener("securitypolicyviolation", (e) => w.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("dialog", (d) => void d.dismiss());
    const seen = new Set<string>();
    const collect = async () => {
      for (const id of await page.evaluate(() => [...document.querySelectorAll("[data-testid]")].map((e) => e.getAttribute("data-testid") ?? ""))) seen.add(id);
    };

    // Pairing screen; a refused token shows its reason in pair-error.
    await page.goto(`${origin}/#pair=npub1x&relays=ws%3A%2F%2F127.0.0.1%3A1&machine=box&token=bad`);
    await page.fill("[data-testid=pair-label]", "Test");
    await page.click("[data-testid=pair-submit]");
    await page.waitForSelector("[data-testid=pair-error]:has-text('bad-token')");
    await collect();
    assert.equal(await overflow(page), 0, "pair screen overflows");

    // Home: machines, sessions (stale, pending, failed), new session, push, manual pairing.
    await page.goto(`${origin}/?n=5000#/`);
    await page.waitForSelector("[data-testid=bridge-item]");
    await page.click("[data-testid=new-session]");
    await page.waitForSelector("[data-testid=new-session-submit]");
    await page.click("[data-testid=manual-pair] summary");
    await page.waitForSelector("[data-testid=my-npub]:has-text('npub1')");
    await collect();
    assert.equal(await overflow(page), 0, "home overflows");
    assert.equal(await page.getAttribute(`[data-testid=bridge-item][data-bridge-id="${BRIDGE}"] [data-testid=presence]`, "data-presence"), "online");
    assert.equal(await page.getAttribute("[data-testid=session-item][data-stale=true]", "data-session-id"), "s-old");

    // A session with every entry type and all three cards; send, attach, answer.
    await page.goto(`${origin}/?n=5000#/b/${BRIDGE}/s/s-run`);
    await page.waitForSelector("[data-testid=card-question]");
    await page.fill("[data-testid=composer-input]", "hello");
    await page.keyboard.press("Enter");
    await page.waitForSelector("[data-testid=outbox-item][data-state=confirmed]");
    await page.setInputFiles("[data-testid=attach-image]", { name: "a.png", mimeType: "image/png", buffer: Buffer.alloc(64, 1) });
    await page.waitForSelector("[data-testid=upload-progress]");
    await collect();
    assert.equal(await overflow(page), 0, "session overflows");
    const hostile = await page.evaluate(() => ({
      pwned: (window as unknown as { __pwned?: unknown }).__pwned ?? null,
      bad: document.querySelectorAll("[data-testid=transcript] :is(img, script, iframe, svg:not(.attach svg), link, style, [onerror])").length,
      links: [...document.querySelectorAll("[data-testid=transcript] a")].map((a) => a.getAttribute("href")).filter((h) => !/^https?:\/\//.test(h ?? "")),
      specials: [...document.querySelectorAll("[data-testid=entry][data-special]")].map((e) => e.getAttribute("data-special")),
    }));
    assert.deepEqual([hostile.pwned, hostile.bad, hostile.links], [null, 0, []]);
    for (const special of ["plan", "session_restart", "card_withdrawn", "edit_review", "permission_request", "session_died"]) {
      assert.ok(hostile.specials.includes(special), special);
    }
    await page.click("[data-testid=card-allow]");
    await page.waitForSelector("[data-testid=card-permission]", { state: "detached" });
    await page.click("[data-testid=question-option][data-index='1']");
    await page.click("[data-testid=question-submit]");
    await page.waitForSelector("[data-testid=card-question]", { state: "detached" });

    // 5,000 entries: every row in the DOM, in seq order, the view at the bottom.
    await page.goto(`${origin}/?n=5000#/b/${BRIDGE}/s/s-big`);
    await page.waitForFunction(() => document.querySelectorAll("[data-testid=entry]").length === 5000);
    const rows = await page.evaluate(() => {
      const seqs = [...document.querySelectorAll("[data-testid=entry]")].map((e) => Number(e.getAttribute("data-seq")));
      const t = document.querySelector("[data-testid=transcript]")!;
      return { ordered: seqs.every((s, i) => s === i), bottom: t.scrollHeight - t.scrollTop - t.clientHeight };
    });
    assert.ok(rows.ordered);
    assert.ok(rows.bottom < 48, `not at the bottom: ${rows.bottom}`);

    // Desktop: two panes, no overflow either.
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.waitForSelector("[data-testid=bridge-item]");
    assert.equal(await overflow(page), 0, "desktop overflows");

    const missing = CONTRACT.filter((id) => !seen.has(id));
    assert.deepEqual(missing, [], `test ids never rendered: ${missing.join(", ")}`);
    assert.deepEqual(await page.evaluate(() => (window as unknown as { __csp: string[] }).__csp), []);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
