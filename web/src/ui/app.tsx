// The app shell: hash routing, one pane on a phone, two panes (machines | session) from 900 px,
// and the notices the service worker passes to a visible page instead of notifying.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import type { ClientRegistry } from "../core/api";
import { Home } from "./home";
import { PairScreen } from "./pair";
import { parsePushPayload, pushTitle } from "./pushpayload";
import { parseRoute, type Route } from "./route";
import { SessionScreen } from "./session";
import { RegistryContext, useChanges, useRegistry } from "./state";

/** A notice from the service worker (a push that came while this page is visible). */
export function pushNotice(data: unknown): string | null {
  if (!data || typeof data !== "object" || (data as Record<string, unknown>)["type"] !== "codedeck-push") return null;
  const facts = parsePushPayload({ ...(data as Record<string, unknown>), v: 1 });
  return facts ? pushTitle(facts) : null;
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return route;
}

const WIDE = "(min-width: 900px)";

/** Whether the two-pane layout applies (a phone shows one pane and does not render the other). */
function useWide(): boolean {
  const [wide, setWide] = useState(() => matchMedia(WIDE).matches);
  useEffect(() => {
    const query = matchMedia(WIDE);
    const on = () => setWide(query.matches);
    query.addEventListener("change", on);
    return () => query.removeEventListener("change", on);
  }, []);
  return wide;
}

function Notice() {
  const [text, setText] = useState<string | null>(null);
  useEffect(() => {
    const sw = "serviceWorker" in navigator ? navigator.serviceWorker : null;
    if (!sw) return;
    let timer = 0;
    const on = (e: MessageEvent) => {
      const t = pushNotice(e.data);
      if (!t) return;
      setText(t);
      clearTimeout(timer);
      timer = window.setTimeout(() => setText(null), 6000);
    };
    sw.addEventListener("message", on);
    sw.startMessages();
    return () => {
      sw.removeEventListener("message", on);
      clearTimeout(timer);
    };
  }, []);
  return text ? <div class="toast" role="status" onClick={() => setText(null)}>{text}</div> : null;
}

/** The tab's title counts the sessions waiting for the user (a glance from another tab). */
function useWaitingTitle(registry: ClientRegistry): void {
  useChanges({ topics: ["sessions", "bridges"] });
  const waiting = registry.bridges().reduce((n, b) => n + b.sessions().filter((v) =>
    !v.stale && (v.info.state === "waiting_permission" || v.info.state === "waiting_question")).length, 0);
  useEffect(() => {
    document.title = waiting > 0 ? `(${waiting}) CodeDeck` : "CodeDeck";
  }, [waiting]);
}

function App() {
  const registry = useRegistry();
  useWaitingTitle(registry);
  const route = useRoute();
  const wide = useWide();
  if (route.kind === "pair") return <PairScreen fragment={route.fragment} />;
  const selected = route.kind === "session" ? route.sessionId : null;
  return (
    <div class={`layout ${route.kind === "session" ? "has-session" : "no-session"}`}>
      {wide || route.kind !== "session" ? <div class="pane list-pane"><Home selected={selected} /></div> : null}
      {wide || route.kind === "session" ? (
        <main class="pane main-pane">
          {route.kind === "session" ? (
            <SessionScreen key={`${route.bridgeId}/${route.sessionId}`} bridgeId={route.bridgeId} sessionId={route.sessionId} />
          ) : (
            <div class="empty-pane muted">Choose a session, or start one.</div>
          )}
        </main>
      ) : null}
      <Notice />
    </div>
  );
}

/** Renders the app into `root` against `registry`. */
export function mountApp(registry: ClientRegistry, root: HTMLElement): void {
  render(
    <RegistryContext.Provider value={registry}>
      <App />
    </RegistryContext.Provider>,
    root,
  );
}

/** Shown when the core could not start (IndexedDB refused, …). */
export function mountFailure(message: string, root: HTMLElement): void {
  render(<div class="panel fatal" role="alert"><h1>CodeDeck could not start</h1><p>{message}</p></div>, root);
}
