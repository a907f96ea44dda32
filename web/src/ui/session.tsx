// A session: its header, the transcript, the cards it waits on and the composer. Opening it asks
// the core to load and sync the transcript; usage is asked for on open and after each turn.
import { Component } from "preact";
import { useEffect, useLayoutEffect, useRef } from "preact/hooks";
import type { BridgeClient, TranscriptItem } from "../core/api";
import { agentOf, MODE_LABEL, STATE_LABEL, stateClass, sessionTitle } from "./agent";
import { Cards } from "./cards";
import { Composer } from "./composer";
import { Entry } from "./entry";
import { PresenceDot } from "./presence";
import { useBridge, useChanges } from "./state";

const BLOCK = 64;

function blocks(items: TranscriptItem[]): TranscriptItem[][] {
  const out: TranscriptItem[][] = [];
  for (let i = 0; i < items.length; i += BLOCK) out.push(items.slice(i, i + BLOCK));
  return out;
}

/** A run of rows that re-renders only when one of its items changed: an entry appended to a long
 * transcript touches the last block, not every row. */
class Block extends Component<{ items: TranscriptItem[] }> {
  override shouldComponentUpdate(next: { items: TranscriptItem[] }): boolean {
    const a = this.props.items;
    const b = next.items;
    if (a.length !== b.length) return true;
    for (let i = 0; i < a.length; i++) if (a[i]!.seq !== b[i]!.seq || a[i]!.entry !== b[i]!.entry) return true;
    return false;
  }

  override render() {
    return <div class="blk">{this.props.items.map((item) => <Entry key={item.seq} item={item} />)}</div>;
  }
}

function Transcript({ items }: { items: TranscriptItem[] }) {
  const scroller = useRef<HTMLDivElement>(null);
  const atBottom = useRef(true);
  // Only the user leaves the bottom: blocks off screen have an estimated height (content-visibility),
  // so the page's own scrolls and the layout settling after them fire scroll events too.
  const intentAt = useRef(0);
  const last = items.length > 0 ? items[items.length - 1]!.seq : -1;

  const onIntent = () => {
    intentAt.current = performance.now();
  };
  const onScroll = () => {
    const el = scroller.current;
    if (!el) return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < 48) atBottom.current = true;
    else if (performance.now() - intentAt.current < 1000) {
      atBottom.current = false;
      intentAt.current = performance.now(); // a fling goes on scrolling after the finger left
    }
    else if (atBottom.current) el.scrollTop = el.scrollHeight; // a block below took its real size
  };
  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && atBottom.current) el.scrollTop = el.scrollHeight;
  }, [last, items.length]);

  return (
    <div class="transcript" data-testid="transcript" ref={scroller} onScroll={onScroll} onWheel={onIntent}
      onTouchStart={onIntent} onTouchMove={onIntent} onPointerDown={onIntent} onKeyDown={onIntent}
      role="log" aria-live="polite" aria-relevant="additions">
      {items.length === 0 ? <div class="empty muted">No messages yet.</div> : null}
      {blocks(items).map((block, i) => <Block key={i} items={block} />)}
    </div>
  );
}

/** The transcript re-renders only when the core hands out a new list (it caches it between changes). */
class StableTranscript extends Component<{ items: TranscriptItem[] }> {
  override shouldComponentUpdate(next: { items: TranscriptItem[] }): boolean {
    return next.items !== this.props.items;
  }

  override render() {
    return <Transcript items={this.props.items} />;
  }
}

function Meters({ client, sessionId, percent }: { client: BridgeClient; sessionId: string; percent: number | undefined }) {
  const usage = client.usage(sessionId);
  const cost = usage?.sessionCostUsd;
  const syncing = client.syncing(sessionId);
  const missing = syncing ? 0 : client.missing(sessionId);
  const pct = percent === undefined ? undefined : Math.max(0, Math.min(100, percent));
  return (
    <div class="meters">
      <div class="ctx" data-testid="context-meter" data-percent={pct === undefined ? "" : String(Math.round(pct))}
        title="Context window used">
        <progress class="ctx-bar" max={100} value={pct ?? 0} aria-hidden="true" />
        <span class="small">{pct === undefined ? "context —" : `${Math.round(pct)}% context`}</span>
      </div>
      <span class="small" data-testid="usage-cost">{typeof cost === "number" ? `$${cost.toFixed(cost < 1 ? 3 : 2)}` : "$ —"}</span>
      <span class={`small sync${syncing || missing > 0 ? " on" : ""}`} data-testid="sync-status"
        data-syncing={String(syncing)} data-missing={String(missing)}>
        {syncing ? "syncing…" : missing > 0 ? `${missing} missing` : "in sync"}
      </span>
    </div>
  );
}

export function SessionScreen({ bridgeId, sessionId }: { bridgeId: string; sessionId: string }) {
  const client = useBridge(bridgeId, ["presence", "machine", "sessions", "pending", "transcript", "outbox", "cards", "usage", "models", "sync"], sessionId);
  const openedFor = useRef<string | null>(null);
  const lastTurnEnd = useRef(-1);
  const items = client ? client.transcript(sessionId) : [];

  useEffect(() => {
    if (!client || openedFor.current === `${bridgeId}/${sessionId}`) return;
    openedFor.current = `${bridgeId}/${sessionId}`;
    lastTurnEnd.current = -1;
    void client.open(sessionId).catch(() => undefined);
    void client.requestUsage(sessionId).catch(() => undefined);
  }, [client, bridgeId, sessionId]);

  // Usage again after each turn end that arrives while the session is open.
  let turnEnd = -1;
  for (let i = items.length - 1; i >= 0 && i >= items.length - 50; i--) {
    if (items[i]!.entry.metadata?.["stream_end"] === true) {
      turnEnd = items[i]!.seq;
      break;
    }
  }
  useEffect(() => {
    if (!client || turnEnd <= lastTurnEnd.current) return;
    lastTurnEnd.current = turnEnd;
    void client.requestUsage(sessionId).catch(() => undefined);
  }, [client, sessionId, turnEnd]);

  useChanges({ bridgeId, topics: ["sessions"] });

  if (!client) {
    return (
      <div class="screen session">
        <header class="bar"><a class="btn back" href="#/" data-testid="back">‹ Back</a></header>
        <div class="empty">This bridge is not paired on this device.</div>
      </div>
    );
  }
  const machine = client.machine();
  const view = client.sessions().find((s) => s.info.id === sessionId);
  const starting = !view && client.pending().some((p) => p.pendingId === sessionId && p.failed === undefined);
  if (!view && starting) {
    return (
      <div class="screen session">
        <header class="bar"><a class="btn back" href="#/" data-testid="back">‹ Back</a></header>
        <div class="empty"><span class="spinner" aria-hidden="true" /> The session is starting on {machine?.machine ?? client.record.machine}…</div>
      </div>
    );
  }
  if (!view) {
    return (
      <div class="screen session">
        <header class="bar"><a class="btn back" href="#/" data-testid="back">‹ Back</a></header>
        <div class="empty">This session is not on {machine?.machine ?? client.record.machine} any more.</div>
        {items.length > 0 ? <Transcript items={items} /> : null}
      </div>
    );
  }
  const info = view.info;
  const agent = agentOf(machine, info);
  const images = machine?.capabilities.includes("images") ?? false;
  const closeSession = () => {
    if (confirm(`Close "${sessionTitle(info)}" on ${machine?.machine ?? "the machine"}? Its agent stops.`)) {
      void client.closeSession(sessionId).then(() => { location.hash = "#/"; }, () => undefined);
    }
  };
  return (
    <div class={`screen session${view.stale ? " stale" : ""}`}>
      <header class="bar session-head">
        <a class="btn back" href="#/" data-testid="back" aria-label="Back to sessions">‹</a>
        <div class="head-main">
          <div class="head-title">
            <PresenceDot presence={client.presence()} />
            <h1>{sessionTitle(info)}</h1>
            <span class={`badge st-${stateClass(info.state)}`}>{STATE_LABEL[info.state ?? "idle"]}</span>
          </div>
          <div class="head-sub small muted">
            <span class="mono cwd" title={info.cwd}>{info.cwd}</span>
            <span> · {agent.label}</span>
            {info.permissionMode ? <span> · {MODE_LABEL[info.permissionMode]}</span> : null}
            {info.sandboxed ? <span class="badge sandbox">sandboxed</span> : null}
            {view.stale ? <span class="badge stale-badge">not in the machine's list</span> : null}
          </div>
        </div>
        <button type="button" class="btn small ghost" onClick={closeSession} title="Close this session on the machine">Close</button>
      </header>
      <Meters client={client} sessionId={sessionId} percent={info.contextPercentage} />
      <StableTranscript items={items} />
      <Cards client={client} cards={client.cards(sessionId)} />
      <Composer client={client} info={info} agent={agent} images={images} />
    </div>
  );
}
