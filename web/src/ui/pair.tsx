// The pairing screen for a `#pair=…` link: the page makes its key (in the core), sends the token
// and, once the bridge said yes, takes the token out of the URL (history.replaceState).
import { useState } from "preact/hooks";
import { defaultLabel } from "./home";
import { useRegistry } from "./state";

function linkFacts(fragment: string): { machine: string; relays: string[] } {
  try {
    const params = new URLSearchParams(fragment.replace(/^#/, ""));
    const relays = (params.get("relays") ?? "").split(",").map((r) => { try { return decodeURIComponent(r); } catch { return r; } }).filter(Boolean);
    return { machine: (params.get("machine") ?? "").slice(0, 64), relays };
  } catch {
    return { machine: "", relays: [] };
  }
}

/** Replaces the location's fragment without a history entry, so the token leaves the URL. */
export function leavePairing(): void {
  history.replaceState(null, "", `${location.pathname}${location.search}#/`);
  dispatchEvent(new HashChangeEvent("hashchange"));
}

export function PairScreen({ fragment }: { fragment: string }) {
  const registry = useRegistry();
  const [label, setLabel] = useState(defaultLabel);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const facts = linkFacts(fragment);
  const submit = (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    registry.pairFromFragment(fragment, label.trim() || defaultLabel()).then(
      () => leavePairing(),
      (err: unknown) => {
        setError(err instanceof Error ? err.message : String(err));
        setBusy(false);
      },
    );
  };
  return (
    <div class="screen pair" data-testid="pair-screen">
      <header class="bar app-bar"><span class="logo" aria-hidden="true" /><h1>Pair this device</h1></header>
      <form class="panel" onSubmit={submit}>
        <p>
          Pair with <strong>{facts.machine || "this machine"}</strong> to drive its coding sessions from here.
          A key is made on this device and never leaves it.
        </p>
        {facts.relays.length ? <p class="small muted">Relays: <span class="mono">{facts.relays.join(", ")}</span></p> : null}
        <label class="field" for="pair-label">
          <span>Name of this device (shown on the machine)</span>
          <input id="pair-label" type="text" data-testid="pair-label" value={label} maxLength={60}
            onInput={(e) => setLabel((e.currentTarget as HTMLInputElement).value)} />
        </label>
        <div class="card-actions">
          <button type="submit" class="btn primary" data-testid="pair-submit" disabled={busy}>{busy ? "Pairing…" : "Pair"}</button>
          <button type="button" class="btn ghost" onClick={leavePairing} disabled={busy}>Cancel</button>
        </div>
        <div class="form-error" data-testid="pair-error" role="alert" hidden={!error}>{error ?? ""}</div>
      </form>
    </div>
  );
}
