// Live check: two bridges in one registry (each with its own key), both online, each session list
// its own, and a reload brings both back:   node test/browser/two.mjs <home 1> <home 2>
import { start } from "./setup.mjs";
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const cli = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", ".venv", "bin", "codedeck-bridge");
const env = await start(process.argv[2]);
const second = process.argv[3];
const link2 = () => "#" + JSON.parse(execFileSync(cli, ["--home", second, "pair", "--json", "--timeout", "120"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })).webUrl.split("#")[1];
const paired2 = [];
try {
  const page = await env.page();
  const result = await page.evaluate(async ({ a, b }) => {
    const registry = await globalThis.core.openRegistry();
    const one = await registry.pairFromFragment(a, "two-bridges");
    const two = await registry.pairFromFragment(b, "two-bridges");
    const end = Date.now() + 20000;
    while ((one.presence() !== "online" || two.presence() !== "online") && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    return {
      npubs: [one.phoneNpub, two.phoneNpub],
      distinctKeys: one.phonePubkey !== two.phonePubkey,
      machines: registry.bridges().map((c) => c.record.machine),
      presence: registry.bridges().map((c) => c.presence()),
    };
  }, { a: env.pairLink(), b: link2() });
  env.paired.push(result.npubs[0]);
  paired2.push(result.npubs[1]);
  console.log(JSON.stringify(result));
  await page.reload();
  await page.waitForFunction(() => globalThis.core !== undefined);
  const after = await page.evaluate(async () => {
    const registry = await globalThis.core.openRegistry();
    const end = Date.now() + 20000;
    while (registry.bridges().some((c) => c.presence() !== "online") && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    return registry.bridges().map((c) => `${c.record.machine}:${c.presence()}:${c.sessions().length}`);
  });
  console.log("after reload", after.join(" "));
} finally {
  for (const npub of paired2) execFileSync(cli, ["--home", second, "unpair", npub], { stdio: "ignore" });
  await env.close();
}
