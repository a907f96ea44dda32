// Live check of cards, uploads, models, push-subscribe and npub pairing against a running bridge
// with the scripted agent:   node test/browser/cards.mjs <bridge home>
import { start } from "./setup.mjs";

const env = await start(process.argv[2]);
try {
  const page = await env.page();
  const first = await page.evaluate(async (fragment) => {
    const registry = await globalThis.core.openRegistry();
    globalThis.registry = registry;
    const client = await registry.pairFromFragment(fragment, "cards check");
    return { id: client.record.id, npub: client.phoneNpub };
  }, env.pairLink());
  env.paired.push(first.npub);
  const out = await page.evaluate(async ({ id }) => {
    const client = globalThis.registry.get(id);
    const log = { push: (line) => console.log(line.join(' ')) };
    const until = async (what, check, ms = 20000) => {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        const v = check();
        if (v) return v;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`timeout waiting for ${what}`);
    };
    const before = new Set(client.sessions().map((s) => s.info.id));
    await client.createSession({});
    const sid = (await until("session", () => client.sessions().find((s) => !before.has(s.info.id)))).info.id;
    await client.open(sid);
    const last = () => client.transcript(sid).at(-1)?.entry;
    const textAfter = async (n) => until("reply", () => client.transcript(sid).slice(n).find((i) => i.entry.entryType === "text" && i.entry.metadata?.role === "assistant"));

    // a question group of two: an option by keypress, then a multi-select by question-input
    const questions = { questions: [
      { question: "Which color?", header: "Color", options: [{ label: "red" }, { label: "blue", description: "calm" }] },
      { question: "Which sizes?", multiSelect: true, options: [{ label: "S" }, { label: "M" }, { label: "L" }] },
    ] };
    let n = client.transcript(sid).length;
    await client.input(sid, `ask AskUserQuestion ${JSON.stringify(questions)}`);
    const q1 = await until("question 1", () => client.cards(sid).find((c) => c.kind === "question"));
    log.push(["q1", q1.index, q1.count, q1.header, q1.options.map((o) => o.label).join("|")]);
    await client.answerQuestion(q1, [1]);
    const q2 = await until("question 2", () => client.cards(sid).find((c) => c.kind === "question" && c.index === 1));
    log.push(["q2", q2.multiSelect]);
    await client.answerQuestion(q2, [0, 2]);
    await until("questions done", () => client.cards(sid).length === 0);
    log.push(["q reply", (await textAfter(n)).entry.content.slice(0, 200)]);

    // a plan card answered with 2
    n = client.transcript(sid).length;
    await client.input(sid, `ask ExitPlanMode ${JSON.stringify({ plan: "# The plan\n1. do it" })}`);
    const plan = await until("plan", () => client.cards(sid).find((c) => c.kind === "plan"));
    log.push(["plan", plan.plan]);
    await client.answerPlan(plan, "2");
    await until("plan done", () => client.cards(sid).length === 0);
    log.push(["plan reply", (await textAfter(n)).entry.content.slice(0, 200)]);

    // a permission denied (acceptEdits cards every command)
    await client.setMode(sid, "acceptEdits");
    await until("acceptEdits", () => client.sessions().find((s) => s.info.id === sid)?.info.permissionMode === "acceptEdits");
    n = client.transcript(sid).length;
    await client.input(sid, `ask Bash ${JSON.stringify({ command: "ls -la" })}`);
    const perm = await until("permission", () => client.cards(sid).find((c) => c.kind === "permission"));
    await client.answerPermission(perm, false);
    await until("permission done", () => client.cards(sid).length === 0);
    log.push(["deny reply", (await textAfter(n)).entry.content.slice(0, 200)]);

    // an image of 100 KB in chunks
    n = client.transcript(sid).length;
    const bytes = new Uint8Array(100_000);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) & 255;
    const progress = [];
    await client.uploadImage(sid, new Blob([bytes], { type: "image/png" }), "pic.png", "look at this", (d) => progress.push(d));
    log.push(["upload progress", progress.map((p) => p.toFixed(2)).join(",")]);
    log.push(["upload reply", (await textAfter(n)).entry.content.slice(0, 200)]);

    // models, mode, effort
    await client.requestModels();
    const models = await until("models", () => client.models());
    log.push(["models", JSON.stringify(models).slice(0, 200)]);
    await client.setMode(sid, "plan");
    await until("mode", () => client.sessions().find((s) => s.info.id === sid)?.info.permissionMode === "plan");
    await client.setEffort(sid, "high");
    await until("effort", () => client.sessions().find((s) => s.info.id === sid)?.info.effortLevel === "high");
    log.push(["mode/effort", "ok"]);

    // push-subscribe (the push service is never contacted by subscribing)
    const ack = await client.pushSubscribe({ endpoint: "http://127.0.0.1:9/push/abc", keys: { p256dh: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", auth: "tBHItJI5svbpez7KI4CCXg" } });
    log.push(["push-ack", JSON.stringify(ack)]);

    // interrupt a slow turn, then close the session: the tombstone removes it
    await client.input(sid, "slow 30");
    await until("running", () => client.sessions().find((s) => s.info.id === sid)?.info.state === "running");
    await client.interrupt(sid);
    await until("interrupted", () => client.transcript(sid).some((i) => i.entry.content === "Interrupted"));
    await client.closeSession(sid);
    await until("tombstone", () => !client.sessions().some((s) => s.info.id === sid));
    log.push(["closed", "ok", client.transcript(sid).length]);
    return log;
  }, { id: first.id });

  // pairing by npub: this device's key is paired on the machine, then the first heartbeat pairs it
  const page2 = await env.page();
  const key = await page2.evaluate(async () => {
    globalThis.registry = await globalThis.core.openRegistry();
    return globalThis.registry.manualPairKey();
  });
  const bridgeNpub = JSON.parse(env.cli("keys", "show", "--json")).npub;
  const relays = JSON.parse(env.cli("pair", "--json", "--timeout", "5")).relays;
  const pairing = page2.evaluate(async ({ bridgeNpub, relays }) => {
    const client = await globalThis.registry.pairByNpub(bridgeNpub, relays, "by npub");
    return { presence: client.presence(), machine: client.record.machine, bridges: globalThis.registry.bridges().length };
  }, { bridgeNpub, relays });
  await new Promise((r) => setTimeout(r, 1000));
  env.cli("pair", "--npub", key.npub, "--label", "by npub");
  env.paired.push(key.npub);
  console.log("paired by npub", JSON.stringify(await pairing));
} finally {
  await env.close();
}
