// An in-memory registry for developing and screenshotting the UI without a bridge (never part of
// the shipped build: src/main.tsx opens the real core). It answers like a bridge would, quickly,
// and its transcript holds every entry type, every card and hostile Markdown.
import type {
  BridgeClient, BridgeRecord, Card, Change, ClientRegistry, CreateSessionOptions, EffortLevel, MachineInfo,
  ModelEntry, OutboxItem, PendingSession, PermissionMode, Presence, SessionView, TranscriptItem, UsageData,
} from "../../core/api";

const HOSTILE = [
  "Hostile check: <img src=x onerror=\"window.__pwned=1\"> and <script>window.__pwned=2</script>",
  "[click me](javascript:window.__pwned=3) and [ok link](https://example.org/docs) and ![remote](https://evil.example/x.png)",
  "<iframe src=\"https://evil.example\"></iframe>",
  "<a href=\"javascript:alert(1)\">raw html link</a> &lt;b&gt;entity&lt;/b&gt;",
].join("\n\n");

const MD = `Here is what I found in **bridge/webclient**:

1. The static files are served by the relay port.
2. The \`Content-Security-Policy\` header is strict.

| File | Lines |
|:-----|------:|
| app.js | 1200 |
| sw.js | 80 |

\`\`\`python
def serve(path: str) -> bytes:
    return (ROOT / path).read_bytes()  # a very long line that should scroll horizontally inside its own block and never widen the page
\`\`\`

> Note: ~~old~~ new behaviour. See https://example.org/a/very/long/url/that/must/wrap/on/a/narrow/phone/screen/without/overflow`;

function entry(entryType: TranscriptItem["entry"]["entryType"], content: string, metadata?: Record<string, unknown>, extra?: object) {
  return { entryType, content, timestamp: new Date().toISOString(), ...(metadata ? { metadata } : {}), ...extra };
}

function sampleTranscript(): TranscriptItem["entry"][] {
  return [
    entry("system", "init: claude-sonnet-4-5, cwd /home/me/project", { subtype: "init" }),
    entry("text", "Please look at the web client and fix the CSP.", { role: "user" }),
    entry("thinking", "The user wants the CSP fixed. Let me read the server module first, then the tests.", { role: "assistant" }),
    entry("tool_use", "Read: bridge/webclient/server.py", { role: "assistant", tool_name: "Read", tool_use_id: "t1", tool_input: { file_path: "bridge/webclient/server.py" } }),
    entry("tool_result", "1\timport asyncio\n2\tfrom pathlib import Path\n3\t\n4\tROOT = Path(__file__).parent / 'static'", { tool_use_id: "t1" }),
    entry("tool_result", Array.from({ length: 40 }, (_, i) => `line ${i + 1}: ${"x".repeat(i * 3)}`).join("\n"), { tool_use_id: "t1b" }),
    entry("text", MD, { role: "assistant", model: "claude-sonnet-4-5" }),
    entry("tool_use", "Edit: bridge/webclient/server.py", { role: "assistant", tool_name: "Edit", tool_use_id: "t2", tool_input: { file_path: "bridge/webclient/server.py", old_string: "a", new_string: "b" } }),
    entry("diff", "-a\n+b", { role: "assistant", tool_name: "Edit", tool_use_id: "t2" }, {
      diff: { path: "bridge/webclient/server.py", truncated: true, lines: [
        { type: "context", text: "def headers() -> dict[str, str]:" },
        { type: "del", text: "    return {\"Content-Security-Policy\": \"default-src *\"}" },
        { type: "add", text: "    return {\"Content-Security-Policy\": \"default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self' ws: wss:\"}" },
        { type: "context", text: "" },
      ] },
    }),
    entry("progress", "Running tests… 12/40"),
    entry("system", "", { stream_end: true }),
    entry("text", HOSTILE, { role: "assistant" }),
    entry("text", "<img src=x onerror=\"window.__pwned=4\"> user text stays plain", { role: "user" }),
    entry("error", "Bad request: the model refused", { error_type: "api_error" }),
    entry("system", "the session host stopped — restarting (1 of 2)\nInterrupted: please also update the", { special: "session_restart", reason: "the session host stopped", interrupted: ["in-1"] }),
    entry("system", "The request to use Bash was withdrawn: the agent restarted", { special: "card_withdrawn", tool_use_id: "t9" }),
    entry("system", "Edit proposed (2 files): review it in the editor", { special: "edit_review", tool_name: "Edit", tool_use_id: "t10", reasons: [] }),
    entry("text", "## Plan\n\n- Tighten the CSP\n- Add a browser test\n- Rebuild the bundle", { role: "assistant", special: "plan", tool_use_id: "t11" }),
    entry("system", "Plan approval needed", { special: "plan_approval", tool_use_id: "t11", has_plan: true }),
    entry("system", "Permission needed: Bash", { special: "permission_request", tool_name: "Bash", tool_use_id: "t12", tool_input: { command: "rm -rf build && npm run build" }, reasons: ["floor:rm"] }),
    entry("system", "Which test runner?", { special: "ask_question", tool_use_id: "t13", options: [{ label: "pytest" }, { label: "node --test" }], question_index: 0, question_count: 2 }),
    entry("system", "usage: 1200 in / 340 out", { subtype: "usage" }),
    entry("error", "The agent exited three times in a row.", { special: "session_died" }),
  ];
}

type Listener = (c: Change) => void;

class FakeClient implements BridgeClient {
  readonly phonePubkey = "ab".repeat(32);
  private readonly items = new Map<string, TranscriptItem[]>();
  private readonly box: OutboxItem[] = [];
  private readonly views: SessionView[];
  private readonly pend: PendingSession[] = [];
  private readonly usages = new Map<string, UsageData>();
  private modelList: { models: ModelEntry[]; defaultModel?: string } | null = null;
  private readonly answered = new Set<string>();
  private syncingSet = new Set<string>();

  constructor(readonly record: BridgeRecord, private pres: Presence, private mach: MachineInfo | null,
    sessions: SessionView[], private readonly emit: Listener, bigN: number) {
    this.views = sessions;
    for (const s of sessions) {
      const entries = sampleTranscript();
      const list: TranscriptItem[] = [];
      const n = s.info.id === "s-big" ? bigN : entries.length;
      for (let i = 0; i < n; i++) {
        const e = entries[i % entries.length]!;
        list.push({ seq: i, entry: s.info.id === "s-big" && e.metadata?.["special"] ? entry("text", `entry ${i}`, { role: "assistant" }) : e });
      }
      this.items.set(s.info.id, list);
    }
    this.pend.push({ pendingId: "p-1", cwd: "projects/new-thing", createdAt: Date.now() });
    this.pend.push({ pendingId: "p-2", cwd: "projects/missing", createdAt: Date.now(), failed: "the folder does not exist" });
  }

  private fire(topic: Change["topic"], sessionId?: string) {
    this.emit({ bridgeId: this.record.id, topic, ...(sessionId ? { sessionId } : {}) });
  }

  presence() { return this.pres; }
  relayStates() { return Object.fromEntries(this.record.relays.map((r) => [r, this.pres === "online"])); }
  machine() { return this.mach; }
  sessions() { return this.views; }
  pending() { return this.pend; }
  transcript(id: string) { return this.items.get(id) ?? []; }
  syncing(id: string) { return this.syncingSet.has(id); }
  missing(_id: string) { return 0; }
  outbox(id: string) { return this.box.filter((o) => o.sessionId === id); }
  cards(id: string): Card[] {
    const cards: Card[] = [
      { kind: "permission", sessionId: id, requestId: "t12", seq: 19, toolName: "Bash", toolInput: { command: "rm -rf build && npm run build", description: "Rebuild" }, reasons: ["floor:rm", "loop_detected"], reasonText: "Deletes files outside the sandbox's reach." },
      { kind: "plan", sessionId: id, requestId: "t11", seq: 18, plan: "## Plan\n\n- Tighten the CSP\n- Add a browser test" },
      { kind: "question", sessionId: id, requestId: "t13", seq: 20, question: "Which test runner should I use?", header: "Tests", options: [{ label: "pytest", description: "The project's runner" }, { label: "node --test", description: "For the web part" }], multiSelect: false, index: 0, count: 2 },
    ];
    return id === "s-run" ? cards.filter((c) => !this.answered.has(c.requestId)) : [];
  }
  usage(id: string) { return this.usages.get(id) ?? null; }
  models() { return this.modelList; }
  async open(id: string) {
    this.syncingSet.add(id);
    this.fire("sync", id);
    setTimeout(() => { this.syncingSet.delete(id); this.fire("sync", id); }, 400);
  }
  async createSession(o: CreateSessionOptions) {
    this.pend.push({ pendingId: null, cwd: o.cwd ?? "", createdAt: Date.now() });
    this.fire("pending");
  }
  async input(sessionId: string, text: string) {
    const item: OutboxItem = { inputId: `in-${Date.now()}`, sessionId, text, state: "pending", createdAt: Date.now() };
    this.box.push(item);
    this.fire("outbox", sessionId);
    setTimeout(() => { item.state = "published"; this.fire("outbox", sessionId); }, 300);
    setTimeout(() => {
      item.state = text.includes("fail") ? "failed" : "confirmed";
      if (item.state === "failed") item.reason = "expired";
      else {
        const list = this.items.get(sessionId)!;
        this.items.set(sessionId, [...list, { seq: list.length, entry: entry("text", text, { role: "user" }) }]);
        this.fire("transcript", sessionId);
      }
      this.fire("outbox", sessionId);
    }, 900);
  }
  async retryInput(id: string) { const it = this.box.find((o) => o.inputId === id); if (it) { it.state = "confirmed"; this.fire("outbox", it.sessionId); } }
  async answerPermission(card: Card & { kind: "permission" }) { this.answered.add(card.requestId); this.fire("cards", card.sessionId); }
  async answerPlan(card: Card & { kind: "plan" }) { this.answered.add(card.requestId); this.fire("cards", card.sessionId); }
  async answerQuestion(card: Card & { kind: "question" }) { this.answered.add(card.requestId); this.fire("cards", card.sessionId); }
  async interrupt() {}
  async setMode(id: string, mode: PermissionMode) { this.patch(id, { permissionMode: mode }); }
  async setModel(id: string, model: string) { this.patch(id, { model }); }
  async setEffort(id: string, level: EffortLevel) { this.patch(id, { effortLevel: level }); }
  private patch(id: string, p: object) {
    const i = this.views.findIndex((v) => v.info.id === id);
    if (i >= 0) this.views[i] = { ...this.views[i]!, info: { ...this.views[i]!.info, ...p } };
    this.fire("sessions");
  }
  async closeSession() {}
  async forgetSession(id: string) { const i = this.views.findIndex((v) => v.info.id === id); if (i >= 0) this.views.splice(i, 1); this.fire("sessions"); }
  async createFolder() { return { success: true }; }
  async uploadImage(_s: string, _f: Blob, _n: string, _t: string, onProgress?: (d: number) => void) {
    for (let i = 1; i <= 4; i++) { await new Promise((r) => setTimeout(r, 250)); onProgress?.(i / 4); }
  }
  async refresh() {}
  async requestModels() {
    setTimeout(() => { this.modelList = { models: [{ id: "claude-sonnet-4-5", label: "Sonnet 4.5" }, { id: "claude-opus-4-1", label: "Opus 4.1" }], defaultModel: "claude-sonnet-4-5" }; this.fire("models"); }, 100);
  }
  async requestUsage(id: string) {
    setTimeout(() => { this.usages.set(id, { available: false, subscriptionType: null, sessionCostUsd: 0.4231, fetchedAt: new Date().toISOString() }); this.fire("usage", id); }, 100);
  }
  async pushSubscribe() { return { success: true }; }
}

function info(id: string, title: string | null, state: SessionView["info"]["state"], extra: object = {}): SessionView["info"] {
  return { id, slug: id.slice(0, 8), cwd: `/home/me/projects/${id}`, lastActivity: new Date(Date.now() - 5 * 60_000).toISOString(), lineCount: 23, title, project: `projects/${id}`, state, permissionMode: "default", effortLevel: "high", model: "claude-sonnet-4-5", contextPercentage: 37, agent: "claude-code", sandboxed: true, ...extra };
}

/** A registry with two bridges (one online with sessions in every state, one offline). */
export function fakeRegistry(options: { bigN?: number; empty?: boolean } = {}): ClientRegistry {
  const listeners = new Set<Listener>();
  const emit: Listener = (c) => listeners.forEach((l) => l(c));
  const hexA = "a1".repeat(32);
  const hexB = "b2".repeat(32);
  const agents = [
    { id: "claude-code", label: "Claude Code", modes: ["default", "acceptEdits", "plan"], efforts: ["low", "medium", "high", "max"], supports: { models: true, usage: true, providers: true, gsd: false, interrupt: true } },
    { id: "opencode", label: "OpenCode", modes: ["default"], efforts: [], supports: { models: false, usage: false, providers: false, gsd: false, interrupt: true } },
  ];
  const machineA: MachineInfo = { machine: "workstation", protocolVersion: 10, capabilities: ["images", "push"], folders: ["projects/codedeck", "projects/site"], roots: ["/home/me/projects"], agents, machineOffline: false, pushKey: "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", receivedAt: Date.now() };
  const clients: FakeClient[] = options.empty ? [] : [
    new FakeClient({ id: hexA, npub: "npub1workstation", machine: "workstation", relays: ["ws://127.0.0.1:7777"], pairedAt: Date.now() }, "online", machineA, [
      { info: info("s-run", "Fix the CSP of the web client and add a browser test", "running"), stale: false },
      { info: info("s-wait", null, "waiting_permission"), stale: false },
      { info: info("s-big", "A long transcript", "idle", { contextPercentage: 92 }), stale: false },
      { info: info("s-old", "An old session", "offline"), stale: true },
    ], emit, options.bigN ?? 5000),
    new FakeClient({ id: hexB, npub: "npub1laptop", machine: "laptop", relays: ["wss://relay.example"], pairedAt: Date.now() }, "offline", null, [], emit, 0),
  ];
  return {
    bridges: () => clients,
    get: (id) => clients.find((c) => c.record.id === id),
    async pairFromFragment(fragment) {
      await new Promise((r) => setTimeout(r, 300));
      if (fragment.includes("token=bad")) throw new Error("The machine refused the pairing: bad-token");
      return clients[0]!;
    },
    async pairByNpub() { throw new Error("No answer from the bridge within 20 s."); },
    async manualPairKey() { return { npub: "npub1q9x8m7wzk6lh2v0s5cda4kq3u3m9yj0ng8xf0ts2rk4v6pl5hxjqsw4pq7c", hex: "cd".repeat(32) }; },
    async forget() {},
    subscribe(l) { listeners.add(l); return () => listeners.delete(l); },
  };
}
