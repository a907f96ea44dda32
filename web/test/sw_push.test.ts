// The shipped service worker (bridge/webclient/static/sw.js) in Chromium, with pushes delivered by
// the DevTools protocol (a headless browser reaches no vendor push service, so the subscription
// itself is tested on the bridge's side, against tests/support/push_service.py): a push while a
// page of the app is visible tells that page and shows nothing; with no page open it shows
// "<machine>: approval waiting"; a hostile payload shows nothing. Skips without Debian's Chromium.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { extname, join } from "node:path";
import type * as Playwright from "playwright-core";

const CHROMIUM = "/usr/bin/chromium";
const WEB = join(import.meta.dirname, "..");
const STATIC = join(WEB, "..", "bridge", "webclient", "static");
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".png": "image/png", ".webmanifest": "application/manifest+json" };
const BRIDGE = "b2".repeat(32);
const SCOPE = `/push/${BRIDGE}/`;
const load = createRequire(join(WEB, "package.json"));

async function serve(): Promise<[Server, string]> {
  const files = new Set(["/index.html", "/app.js", "/app.css", "/sw.js", "/icon.svg", "/icon-192.png", "/icon-512.png", "/manifest.webmanifest"]);
  const server = createServer((req, res) => {
    let path = new URL(req.url ?? "/", "http://x").pathname;
    if (path === "/") path = "/index.html";
    if (!files.has(path)) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": TYPES[extname(path)] ?? "application/octet-stream", "content-security-policy": CSP, "cache-control": "no-store" });
    res.end(readFileSync(join(STATIC, path)));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("no port");
  return [server, `http://127.0.0.1:${address.port}`];
}

test("the service worker: a visible page is told, an absent one notified, a hostile push ignored", { skip: !existsSync(CHROMIUM) && "no /usr/bin/chromium", timeout: 60_000 }, async () => {
  const { chromium } = load("playwright-core") as typeof Playwright;
  const [server, origin] = await serve();
  const profile = mkdtempSync(join(tmpdir(), "codedeck-sw-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    viewport: { width: 375, height: 812 },
  });
  try {
    await context.grantPermissions(["notifications"], { origin });
    const page = context.pages()[0] ?? (await context.newPage());
    const cdp = await context.newCDPSession(page);
    const registrations = new Map<string, string>(); // scope URL → registration id
    cdp.on("ServiceWorker.workerRegistrationUpdated", (event: { registrations: { registrationId: string; scopeURL: string; isDeleted: boolean }[] }) => {
      for (const r of event.registrations) if (!r.isDeleted) registrations.set(r.scopeURL, r.registrationId);
    });
    await cdp.send("ServiceWorker.enable");
    await page.goto(`${origin}/`);
    await page.evaluate(async (scope) => {
      const w = window as unknown as { __pushes: unknown[] };
      w.__pushes = [];
      navigator.serviceWorker.addEventListener("message", (e) => w.__pushes.push(e.data));
      const registration = await navigator.serviceWorker.register("/sw.js", { scope });
      const worker = registration.installing ?? registration.waiting ?? registration.active;
      if (worker && worker.state !== "activated") {
        await new Promise<void>((done) => worker.addEventListener("statechange", () => worker.state === "activated" && done()));
      }
    }, SCOPE);
    const scopeUrl = `${origin}${SCOPE}`;
    for (let i = 0; i < 50 && !registrations.has(scopeUrl); i++) await new Promise((r) => setTimeout(r, 100));
    const registrationId = registrations.get(scopeUrl);
    assert.ok(registrationId, `no registration for ${scopeUrl}: ${[...registrations.keys()].join(", ")}`);
    const push = (payload: unknown) => cdp.send("ServiceWorker.deliverPushMessage", { origin, registrationId, data: JSON.stringify(payload) });
    const notifications = () => page.evaluate(async (scope) => {
      const registration = await navigator.serviceWorker.getRegistration(scope);
      return (await registration!.getNotifications()).map((n) => n.title);
    }, SCOPE);
    const waitFor = async <T>(probe: () => Promise<T>, ok: (value: T) => boolean): Promise<T> => {
      let value = await probe();
      for (let i = 0; i < 50 && !ok(value); i++) {
        await new Promise((r) => setTimeout(r, 100));
        value = await probe();
      }
      return value;
    };

    // A page of the app is visible: it is told, and nothing is shown.
    await push({ v: 1, bridge: BRIDGE, machine: "testbox", reason: "approval", count: 1 });
    const told = await waitFor(() => page.evaluate(() => (window as unknown as { __pushes: unknown[] }).__pushes), (p) => p.length > 0);
    assert.deepEqual(told, [{ type: "codedeck-push", bridge: BRIDGE, machine: "testbox", reason: "approval", count: 1 }]);
    assert.deepEqual(await notifications(), []);

    // No page of the app: a notification says which machine and why, and nothing more.
    await page.goto("about:blank");
    await push({ v: 1, bridge: BRIDGE, machine: "testbox", reason: "approval", count: 3, text: "rm -rf secret" });
    await page.goto(`${origin}/`);
    const shown = await waitFor(notifications, (n) => n.length > 0);
    assert.deepEqual(shown, ["testbox: approval waiting (3)"]);

    // A hostile payload (unknown reason, script in the name) shows nothing new.
    await page.goto("about:blank");
    await push({ v: 1, bridge: "<script>", machine: "<img src=x onerror=alert(1)>", reason: "pwned", count: 1 });
    await push("not an object");
    await page.goto(`${origin}/`);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await notifications(), ["testbox: approval waiting (3)"]);
  } finally {
    await context.close();
    server.close();
    rmSync(profile, { recursive: true, force: true });
  }
});
