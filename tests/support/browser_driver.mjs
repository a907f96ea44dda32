// A real browser for the Python tests: Debian's Chromium driven by playwright-core, one JSON line
// per command on stdin, one JSON line per answer on stdout (tests/support/browser.py is its client).
//
// Why a line protocol instead of Playwright for Python: the project installs no Python browser
// package and downloads no browser; web/node_modules already holds playwright-core (the front
// end's own lockfile pins it), and Debian's chromium is the browser. The tests stay in Python, so
// they can kill -9 the bridge, read its store and drive the browser in one test.
//
//   node browser_driver.mjs <profile dir>
//   stdin:  {"id": 1, "cmd": "goto", "url": "http://127.0.0.1:7777/", "timeout": 10000}
//   stdout: {"id": 1, "ok": true, "value": null}   or   {"id": 1, "ok": false, "error": "..."}
//
// The profile dir is a persistent context (launchPersistentContext): IndexedDB, the service
// worker and localStorage survive a reload within one test, and the next test starts empty.
// Console messages, page errors and dialogs are recorded from the start (the `logs` command);
// every dialog is dismissed (or, after `dialogs {accept: true}`, accepted: a confirm() the user
// says yes to), so a hostile alert() cannot hang a test but is still seen.
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const webDir = resolve(process.env.CDB_WEB_DIR || join(here, "..", "..", "web"));
const require = createRequire(join(webDir, "package.json"));
const { chromium } = require("playwright-core");

const profile = process.argv[2];
if (!profile) {
  process.stderr.write("usage: node browser_driver.mjs <profile dir>\n");
  process.exit(2);
}

// Quiet flags: no first-run UI, no background traffic (component updates, sync, QUIC probes),
// so the browser reaches nothing but the 127.0.0.1 servers a test opens.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  "--disable-breakpad",
  "--disable-crash-reporter",
  "--disable-features=Translate,MediaRouter,OptimizationHints",
];

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ARGS,
  viewport: { width: 375, height: 812 },
  deviceScaleFactor: 2,
  serviceWorkers: "allow",
});
const console_ = [];
const errors = [];
const dialogs = [];
let acceptDialogs = false;
const page = context.pages()[0] ?? (await context.newPage());
page.on("console", (message) => {
  const where = message.location();
  console_.push({
    type: message.type(),
    text: message.text(),
    url: where ? where.url : "",
  });
});
page.on("pageerror", (error) => errors.push(String(error && error.stack ? error.stack : error)));
page.on("dialog", (dialog) => {
  dialogs.push({ type: dialog.type(), message: dialog.message() });
  (acceptDialogs ? dialog.accept() : dialog.dismiss()).catch(() => {});
});
// CSP violations as the page sees them (the console shows them too, worded per browser version).
await context.addInitScript(() => {
  window.__cdbCsp = [];
  document.addEventListener("securitypolicyviolation", (event) => {
    window.__cdbCsp.push({
      directive: event.violatedDirective,
      blocked: event.blockedURI,
      source: event.sourceFile,
      sample: event.sample,
    });
  });
});

function locate(cmd) {
  let locator = page.locator(cmd.selector);
  if (typeof cmd.text === "string") locator = locator.filter({ hasText: cmd.text });
  return locator;
}

const HANDLERS = {
  async goto(cmd) {
    await page.goto(cmd.url, { timeout: cmd.timeout, waitUntil: cmd.waitUntil || "load" });
    return page.url();
  },
  async reload(cmd) {
    await page.reload({ timeout: cmd.timeout, waitUntil: cmd.waitUntil || "load" });
    return page.url();
  },
  async url() {
    return page.url();
  },
  async click(cmd) {
    await locate(cmd).nth(cmd.index ?? 0).click({ timeout: cmd.timeout });
    return null;
  },
  async fill(cmd) {
    await locate(cmd).nth(cmd.index ?? 0).fill(cmd.value, { timeout: cmd.timeout });
    return null;
  },
  async press(cmd) {
    await locate(cmd).nth(cmd.index ?? 0).press(cmd.key, { timeout: cmd.timeout });
    return null;
  },
  async select(cmd) {
    return await locate(cmd).nth(cmd.index ?? 0).selectOption(cmd.value, { timeout: cmd.timeout });
  },
  async setFiles(cmd) {
    await locate(cmd).nth(cmd.index ?? 0).setInputFiles(cmd.files, { timeout: cmd.timeout });
    return null;
  },
  async waitFor(cmd) {
    await locate(cmd).nth(cmd.index ?? 0).waitFor({ state: cmd.state || "visible", timeout: cmd.timeout });
    return null;
  },
  async waitForCount(cmd) {
    // Until exactly `count` elements match (e.g. every entry row of a transcript).
    const started = Date.now();
    for (;;) {
      const count = await locate(cmd).count();
      if (count === cmd.count) return count;
      if (Date.now() - started > cmd.timeout) {
        throw new Error(`waitForCount ${cmd.selector}: ${count} match, wanted ${cmd.count}`);
      }
      await new Promise((done) => setTimeout(done, 50));
    }
  },
  async count(cmd) {
    return await locate(cmd).count();
  },
  async attr(cmd) {
    return await locate(cmd).nth(cmd.index ?? 0).getAttribute(cmd.name, { timeout: cmd.timeout });
  },
  async attrs(cmd) {
    // One attribute of every match, in document order (null where absent).
    return await locate(cmd).evaluateAll((nodes, name) => nodes.map((node) => node.getAttribute(name)), cmd.name);
  },
  async text(cmd) {
    return await locate(cmd).nth(cmd.index ?? 0).innerText({ timeout: cmd.timeout });
  },
  async texts(cmd) {
    return await locate(cmd).allInnerTexts();
  },
  async visible(cmd) {
    return await locate(cmd).nth(cmd.index ?? 0).isVisible();
  },
  async eval(cmd) {
    return await page.evaluate(cmd.expression);
  },
  async waitForFunction(cmd) {
    await page.waitForFunction(cmd.expression, undefined, { timeout: cmd.timeout, polling: 50 });
    return null;
  },
  async screenshot(cmd) {
    await page.screenshot({ path: cmd.path, fullPage: Boolean(cmd.fullPage), timeout: cmd.timeout });
    return cmd.path;
  },
  async setViewport(cmd) {
    await page.setViewportSize({ width: cmd.width, height: cmd.height });
    return null;
  },
  async setOffline(cmd) {
    await context.setOffline(Boolean(cmd.offline));
    return null;
  },
  async dialogs(cmd) {
    acceptDialogs = Boolean(cmd.accept);
    return null;
  },
  async logs(cmd) {
    const value = { console: [...console_], errors: [...errors], dialogs: [...dialogs] };
    if (cmd.clear) {
      console_.length = 0;
      errors.length = 0;
      dialogs.length = 0;
    }
    return value;
  },
  async close() {
    await context.close();
    return null;
  },
};

function answer(reply) {
  process.stdout.write(JSON.stringify(reply) + "\n");
}

answer({ id: 0, ok: true, value: { version: context.browser()?.version() ?? null, ready: true } });

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (error) {
    answer({ id: null, ok: false, error: `not JSON: ${error}` });
    continue;
  }
  const handler = HANDLERS[cmd.cmd];
  if (!handler) {
    answer({ id: cmd.id, ok: false, error: `unknown command ${JSON.stringify(cmd.cmd)}` });
    continue;
  }
  try {
    cmd.timeout = cmd.timeout ?? 10000;
    const value = await handler(cmd);
    answer({ id: cmd.id, ok: true, value: value === undefined ? null : value });
  } catch (error) {
    answer({ id: cmd.id, ok: false, error: String(error && error.message ? error.message : error).replace(/\x1b\[[0-9;]*m/g, "") });
  }
  if (cmd.cmd === "close") break;
}
await context.close().catch(() => {});
process.exit(0);
