// The home screen: every paired bridge with its presence and sessions (stale ones greyed, pending
// and failed creations as placeholders), a new-session form per bridge, and manual pairing.
import { useEffect, useRef, useState } from "preact/hooks";
import type { BridgeClient, SessionView } from "../core/api";
import { ago, STATE_LABEL, stateClass, sessionTitle } from "./agent";
import { PresenceDot } from "./presence";
import { PushControl } from "./push";
import { sessionHash } from "./route";
import { useAction, useBridge, useChanges, useRegistry } from "./state";

function SessionItem({ client, view, selected }: { client: BridgeClient; view: SessionView; selected: boolean }) {
  const info = view.info;
  const state = info.state ?? "idle";
  const forget = () => {
    if (confirm(`Remove "${sessionTitle(info)}" from this device? The machine is not asked.`)) void client.forgetSession(info.id);
  };
  return (
    <li class={`session-item${view.stale ? " stale" : ""}${selected ? " selected" : ""}`} data-testid="session-item"
      data-session-id={info.id} data-state={state} data-stale={String(view.stale)}>
      <a class="session-link" href={sessionHash(client.record.id, info.id)} aria-current={selected ? "page" : undefined}>
        <span class="si-top">
          <span class="si-title">{sessionTitle(info)}</span>
          <span class={`badge st-${stateClass(state)}`}>{STATE_LABEL[state]}</span>
        </span>
        <span class="si-sub small muted">
          <span class="mono cwd">{info.project || info.cwd}</span>
          <span> · {ago(info.lastActivity)}</span>
        </span>
        {view.stale ? <span class="si-note small">Not in the machine's latest list: it may have ended.</span> : null}
      </a>
      {view.stale ? (
        <button type="button" class="btn small ghost" onClick={forget}>Remove from this device</button>
      ) : null}
    </li>
  );
}

function NewSession({ client }: { client: BridgeClient }) {
  const machine = client.machine();
  const [open, setOpen] = useState(false);
  const [cwd, setCwd] = useState("");
  const [createCwd, setCreateCwd] = useState(false);
  const agents = machine?.agents ?? [];
  const [agent, setAgent] = useState("");
  const [busy, error, run] = useAction();
  // The creation this form started: its session is opened once it is ready (two-phase create).
  const started = useRef<{ at: number; ids: Set<string>; before: Set<string> } | null>(null);
  const folders = [...(machine?.roots ?? []), ...(machine?.folders ?? [])].slice(0, 300);
  const id = client.record.id.slice(0, 12);

  const mine = started.current;
  if (mine) {
    for (const p of client.pending()) if (p.pendingId && p.createdAt >= mine.at - 2000) mine.ids.add(p.pendingId);
    const sessions = client.sessions();
    // Its pendingId names it; if session-pending and session-ready came in one frame, it is the one
    // session that appeared since the submit while no creation of ours is in flight any more.
    const fresh = sessions.filter((v) => !mine.before.has(v.info.id));
    const inFlight = client.pending().some((p) => p.createdAt >= mine.at - 2000 && p.failed === undefined);
    const ready = sessions.find((v) => mine.ids.has(v.info.id)) ?? (!inFlight && fresh.length === 1 ? fresh[0] : undefined);
    if (ready) {
      started.current = null;
      queueMicrotask(() => { location.hash = sessionHash(client.record.id, ready.info.id); });
    }
  }

  const submit = (e: Event) => {
    e.preventDefault();
    const options = {
      ...(cwd.trim() ? { cwd: cwd.trim() } : {}),
      ...(createCwd ? { createCwd: true } : {}),
      ...(agent ? { agent } : {}),
    };
    const at = Date.now();
    started.current = { at, ids: new Set(), before: new Set(client.sessions().map((v) => v.info.id)) };
    void run(() => client.createSession(options)).then((ok) => {
      if (ok) {
        setCwd("");
        setOpen(false);
      } else started.current = null;
    });
  };
  if (!open) {
    return (
      <div class="new-session">
        <button type="button" class="btn small" data-testid="new-session" onClick={() => setOpen(true)}>New session</button>
      </div>
    );
  }
  return (
    <div class="new-session">
      <form onSubmit={submit} aria-label="New session">
        <h3 class="form-title" data-testid="new-session">New session</h3>
        <label class="field" for={`ns-cwd-${id}`}>
          <span>Folder</span>
          <input id={`ns-cwd-${id}`} type="text" list={`ns-folders-${id}`} data-testid="new-session-cwd" value={cwd}
            placeholder={folders[0] ?? "the bridge's default folder"} autocomplete="off" spellcheck={false}
            onInput={(e) => setCwd((e.currentTarget as HTMLInputElement).value)} />
          <datalist id={`ns-folders-${id}`}>
            {folders.map((f) => <option key={f} value={f} />)}
          </datalist>
        </label>
        <label class="check">
          <input type="checkbox" checked={createCwd} onChange={(e) => setCreateCwd((e.currentTarget as HTMLInputElement).checked)} />
          <span>Create the folder if it does not exist</span>
        </label>
        <label class="field" for={`ns-agent-${id}`}>
          <span>Agent</span>
          <select id={`ns-agent-${id}`} data-testid="new-session-agent" value={agent}
            onChange={(e) => setAgent((e.currentTarget as HTMLSelectElement).value)}>
            <option value="">{agents.length ? `Default (${agents[0]!.label})` : "Default"}</option>
            {agents.map((a) => <option key={a.id} value={a.id}>{a.label}</option>)}
          </select>
        </label>
        <div class="card-actions">
          <button type="submit" class="btn primary" data-testid="new-session-submit" disabled={busy || client.presence() === "offline"}>
            {busy ? "Starting…" : "Start session"}
          </button>
          <button type="button" class="btn ghost" onClick={() => setOpen(false)}>Cancel</button>
        </div>
        {error ? <div class="form-error" role="alert">{error}</div> : null}
      </form>
    </div>
  );
}

function BridgePanel({ bridgeId, selected }: { bridgeId: string; selected: string | null }) {
  const registry = useRegistry();
  const client = useBridge(bridgeId, ["presence", "machine", "sessions", "pending", "folders"]);
  if (!client) return null;
  const machine = client.machine();
  const presence = client.presence();
  const sessions = client.sessions();
  const pending = client.pending();
  const relays = client.relayStates();
  const up = Object.values(relays).filter(Boolean).length;
  const name = machine?.machine ?? client.record.machine ?? client.record.npub.slice(0, 16);
  const forget = () => {
    if (confirm(`Forget ${name} on this device? Its key and transcripts here are deleted.`)) void registry.forget(bridgeId);
  };
  return (
    <section class="bridge" data-testid="bridge-item" data-bridge-id={bridgeId} aria-label={`Machine ${name}`}>
      <header class="bridge-head">
        <PresenceDot presence={presence} />
        <div class="bridge-name">
          <h2>{name}</h2>
          <div class="small muted">{presence === "offline" && machine?.machineOffline ? "stopped" : presence}{Object.keys(relays).length ? ` · ${up}/${Object.keys(relays).length} relays` : ""}</div>
        </div>
        <span class="end">
          <button type="button" class="btn small ghost" onClick={() => void client.refresh().catch(() => undefined)} title="Ask the machine for its session list">Refresh</button>
          <button type="button" class="btn small ghost" onClick={forget}>Forget</button>
        </span>
      </header>
      <PushControl client={client} />
      <ul class="session-list" data-testid="session-list">
        {pending.map((p, i) => p.failed !== undefined ? (
          <li key={`f${i}`} class="placeholder failed" data-testid="session-failed" role="alert">
            <strong>Could not start a session</strong> <span class="mono cwd">{p.cwd}</span>
            <div class="small">{p.failed}</div>
          </li>
        ) : (
          <li key={`p${p.pendingId ?? i}`} class="placeholder" data-testid="pending-session">
            <span class="spinner" aria-hidden="true" /> Starting a session{p.cwd ? <> in <span class="mono cwd">{p.cwd}</span></> : null}…
          </li>
        ))}
        {sessions.map((v) => <SessionItem key={v.info.id} client={client} view={v} selected={selected === v.info.id} />)}
        {sessions.length === 0 && pending.length === 0 ? (
          <li class="empty small muted">{machine ? "No sessions yet." : "Waiting for the machine's session list…"}</li>
        ) : null}
      </ul>
      <NewSession client={client} />
    </section>
  );
}

function ManualPair({ open }: { open: boolean }) {
  const registry = useRegistry();
  const [mine, setMine] = useState<string | null>(null);
  const [npub, setNpub] = useState("");
  const [relays, setRelays] = useState(location.protocol === "https:" ? `wss://${location.host}` : `ws://${location.host}`);
  const [busy, error, run] = useAction();
  const [done, setDone] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void registry.manualPairKey().then((k) => { if (live) setMine(k.npub); }, () => undefined);
    return () => { live = false; };
  }, [registry]);
  const submit = (e: Event) => {
    e.preventDefault();
    const list = relays.split(/[\s,]+/).map((r) => r.trim()).filter(Boolean);
    setDone(null);
    void run(async () => {
      const client = await registry.pairByNpub(npub.trim(), list, defaultLabel());
      setDone(`Paired with ${client.record.machine}.`);
      setNpub("");
    });
  };
  return (
    <details class="manual-pair panel" data-testid="manual-pair" open={open}>
      <summary>Pair by npub</summary>
      <p class="small">On the machine, run:</p>
      <pre class="mono cmd">codedeck-bridge pair --npub <span data-testid="my-npub">{mine ?? "…"}</span></pre>
      <p class="small">then enter the bridge's npub and relays it printed:</p>
      <form onSubmit={submit}>
        <label class="field" for="mp-npub">
          <span>Bridge npub</span>
          <input id="mp-npub" type="text" data-testid="manual-pair-npub" value={npub} placeholder="npub1…" autocomplete="off"
            spellcheck={false} onInput={(e) => setNpub((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <label class="field" for="mp-relays">
          <span>Relays (comma separated)</span>
          <input id="mp-relays" type="text" data-testid="manual-pair-relays" value={relays} autocomplete="off" spellcheck={false}
            onInput={(e) => setRelays((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <button type="submit" class="btn primary" data-testid="manual-pair-submit" disabled={busy || !npub.trim()}>
          {busy ? "Pairing…" : "Pair"}
        </button>
        {error ? <div class="form-error" role="alert">{error}</div> : null}
        {done ? <div class="small ok" role="status">{done}</div> : null}
      </form>
    </details>
  );
}

export function defaultLabel(): string {
  const uaData = (navigator as Navigator & { userAgentData?: { platform?: string } }).userAgentData;
  const platform = uaData?.platform || navigator.platform || "this browser";
  return `Web on ${platform}`.slice(0, 60);
}

export function Home({ selected }: { selected: string | null }) {
  const registry = useRegistry();
  useChanges({ topics: ["bridges"] });
  const bridges = registry.bridges();
  return (
    <div class="screen home">
      <header class="bar app-bar"><span class="logo" aria-hidden="true" /><h1>CodeDeck</h1></header>
      <div class="home-body">
        {bridges.length === 0 ? (
          <div class="panel intro">
            <h2>No machine paired yet</h2>
            <p>On the machine, run <code>codedeck-bridge pair</code> and open the link it prints (or scan its QR code) with this device.</p>
          </div>
        ) : null}
        {bridges.map((b) => <BridgePanel key={b.record.id} bridgeId={b.record.id} selected={selected} />)}
        <ManualPair open={bridges.length === 0} />
      </div>
    </div>
  );
}
