// Drives the core in Chromium against a running bridge (a manual check, not part of `npm test`):
//   node test/browser/live.mjs <bridge home> [lines] [second]
// (the bridge runs with that home; `pair --json` gives each pairing's link).
// Serves a harness page on 127.0.0.1 (a secure context with IndexedDB), pairs, creates a session,
// sends `lines N` to the scripted agent, reloads, opens the session again and times the load.
import { build } from "esbuild";
import { createServer } from "node:http";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const home = process.argv[2];
const pairLink = () => {
  const out = execFileSync(join(here, "..", "..", "..", ".venv", "bin", "codedeck-bridge"), ["--home", home, "pair", "--json", "--timeout", "300"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  return "#" + JSON.parse(out).webUrl.split("#")[1];
};
const fragment = pairLink();
const paired = [];
const unpairAll = () => {
  for (const npub of paired) {
    execFileSync(join(here, "..", "..", "..", ".venv", "bin", "codedeck-bridge"), ["--home", home, "unpair", npub], { stdio: "ignore" });
  }
};
const lines = Number(process.argv[3] ?? 50);
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
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("console", (m) => console.log(`[page ${m.type()}] ${m.text().slice(0, 300)}`));
  await page.goto(origin);
  await page.waitForFunction(() => globalThis.core !== undefined);
  const t0 = Date.now();
  const first = await page.evaluate(async (fragment) => {
    const registry = await globalThis.core.openRegistry();
    globalThis.registry = registry;
    const client = await registry.pairFromFragment(fragment, "live test");
    return { id: client.record.id, relays: client.record.relays, machine: client.record.machine, npub: client.phoneNpub };
  }, fragment);
  paired.push(first.npub);
  console.log("paired in", Date.now() - t0, "ms", first);
  const result = await page.evaluate(async ({ id, lines }) => {
    const client = globalThis.registry.get(id);
    const until = async (what, check, ms = 30000) => {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        const v = check();
        if (v) return v;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timeout waiting for ${what}`);
    };
    await until("online", () => client.presence() === "online");
    const before = new Set(client.sessions().map((s) => s.info.id));
    await client.createSession({});
    const session = await until("session", () => client.sessions().find((s) => !before.has(s.info.id)));
    const sid = session.info.id;
    await client.open(sid);
    await client.input(sid, `lines ${lines}`);
    const t1 = Date.now();
    await until("entries", () => client.transcript(sid).some((i) => i.entry.content === `line ${lines} of ${lines}`), 120000).catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(client.transcript(sid).slice(-5))} outbox ${JSON.stringify(client.outbox(sid))} syncing ${client.syncing(sid)}`); });
    const streamed = Date.now() - t1;
    await until("confirmed", () => client.outbox(sid).every((o) => o.state === "confirmed"));
    await client.input(sid, 'ask Bash {"command":"ls"}');
    const card = await until("card", () => client.cards(sid)[0]);
    await client.answerPermission(card, true);
    await until("card gone", () => client.cards(sid).length === 0);
    await until("answered", () => client.transcript(sid).some((i) => i.entry.content.includes("allowed") || i.entry.content.includes("Allowed")), 15000).catch(() => null);
    const folder = await client.createFolder(`f${Date.now()}`);
    await client.requestUsage(sid);
    await until("usage", () => client.usage(sid), 10000).catch(() => null);
    return { sid, entries: client.transcript(sid).length, streamed, folder, usage: client.usage(sid), machine: client.machine(), outbox: client.outbox(sid), state: client.sessions().find((s) => s.info.id === sid) };
  }, { id: first.id, lines });
  console.log("session", result.sid, "entries", result.entries, "streamed in", result.streamed, "ms");
  console.log("folder", JSON.stringify(result.folder), "usage", JSON.stringify(result.usage));
  console.log("caps", result.machine.capabilities.join(","), "pushKey", Boolean(result.machine.pushKey));
  await page.reload();
  await page.waitForFunction(() => globalThis.core !== undefined);
  const reloaded = await page.evaluate(async ({ id, sid }) => {
    const t0 = performance.now();
    const registry = await globalThis.core.openRegistry();
    const client = registry.get(id);
    const opened = performance.now();
    await client.open(sid);
    const loaded = performance.now();
    const end = Date.now() + 30000;
    while (client.syncing(sid) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    return { registryMs: opened - t0, loadMs: loaded - opened, syncedMs: performance.now() - opened, entries: client.transcript(sid).length, sessions: client.sessions().length, presence: client.presence() };
  }, { id: first.id, sid: result.sid });
  console.log("after reload", JSON.stringify(reloaded));
  if (process.argv[4]) {
    const second = pairLink();
    // A second device (its own IndexedDB): pairs and syncs the whole session from the bridge.
    const other = await (await browser.newContext()).newPage();
    other.on("console", (m) => console.log(`[other ${m.type()}] ${m.text().slice(0, 300)}`));
    await other.goto(origin);
    await other.waitForFunction(() => globalThis.core !== undefined);
    const synced = await other.evaluate(async ({ fragment, sid, want }) => {
      const registry = await globalThis.core.openRegistry();
      const t0 = performance.now();
      const client = await registry.pairFromFragment(fragment, "second");
      const paired = performance.now() - t0;
      const end = Date.now() + 60000;
      while (!client.sessions().some((s) => s.info.id === sid) && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      const t1 = performance.now();
      await client.open(sid);
      while (client.transcript(sid).length < want && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      return { npub: client.phoneNpub, paired, syncMs: performance.now() - t1, entries: client.transcript(sid).length, syncing: client.syncing(sid) };
    }, { fragment: second, sid: result.sid, want: result.entries });
    paired.push(synced.npub);
    console.log("second device", JSON.stringify(synced));
  }
  if (process.env.RESTART_CMD) {
    // kill -9 the bridge mid-turn, start it again: the page must reconnect and catch up gap-free.
    // A second registry in the same page (the first, from the reload, is still live) plays a second
    // tab with the same key: both sync the session, each replacing the other's sync at the bridge.
    // A second registry in the same page (the first from the reload is still live) plays a second
    // tab with the same key: both sync the session, each replacing the other's sync at the bridge.
    const t = Date.now();
    await page.evaluate(async ({ id, sid }) => {
      const registry = await globalThis.core.openRegistry();
      globalThis.registry = registry;
      const client = registry.get(id);
      await client.open(sid);
      await client.input(sid, "lines 3000");
    }, { id: first.id, sid: result.sid });
    await new Promise((r) => setTimeout(r, 700));
    execFileSync("sh", ["-c", process.env.KILL_CMD]);
    console.log("killed the bridge at", Date.now() - t, "ms");
    await new Promise((r) => setTimeout(r, 300));
    // typed while the bridge (and its embedded relay) is down: pending, then out on reconnect
    const offline = await page.evaluate(async ({ id, sid }) => {
      const client = globalThis.registry.get(id);
      const sent = client.input(sid, "written offline").then(() => "published", (e) => e.message);
      await new Promise((r) => setTimeout(r, 300));
      const item = client.outbox(sid).find((o) => o.text === "written offline");
      globalThis.offlineSent = sent;
      return { state: item?.state, presence: client.presence() };
    }, { id: first.id, sid: result.sid });
    console.log("input while down", JSON.stringify(offline));
    await new Promise((r) => setTimeout(r, 1200));
    execFileSync("sh", ["-c", process.env.RESTART_CMD]);
    console.log("restarted the bridge at", Date.now() - t, "ms");
    const caught = await page.evaluate(async ({ id, sid }) => {
      const client = globalThis.registry.get(id);
      const end = Date.now() + 90000;
      const done = () => client.transcript(sid).some((i) => i.entry.content === "line 3000 of 3000");
      const t0 = Date.now();
      const trace = setInterval(() => console.log(`trace +${Date.now() - t0} ms: entries ${client.transcript(sid).length} syncing ${client.syncing(sid)} presence ${client.presence()} relays ${JSON.stringify(client.relayStates())}`), 2000);
      while (!(done() && !client.syncing(sid)) && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
      clearInterval(trace);
      const seqs = client.transcript(sid).map((i) => i.seq);
      const gaps = seqs.filter((s, i) => i > 0 && s !== seqs[i - 1] + 1).length;
      const echoed = await (async () => {
        while (!client.transcript(sid).some((i) => i.entry.content === "echo: written offline") && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
        return client.outbox(sid).find((o) => o.text === "written offline")?.state;
      })();
      return { offlineInput: echoed, offlineSend: await globalThis.offlineSent, done: done(), entries: seqs.length, first: seqs[0], last: seqs[seqs.length - 1], gaps, presence: client.presence(), outbox: client.outbox(sid).map((o) => o.state) };
    }, { id: first.id, sid: result.sid });
    console.log("after kill -9", Date.now() - t, "ms", JSON.stringify(caught));
  }
} finally {
  unpairAll();
  await browser.close();
  server.close();
}
