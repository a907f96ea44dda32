// How components follow the core: the registry is passed down by context; a component names the
// changes it cares about and re-renders (at most once per animation frame) when one arrives. The
// core keeps the state; components only read it during render.
import { createContext } from "preact";
import { useContext, useLayoutEffect, useState } from "preact/hooks";
import type { BridgeClient, Change, ChangeTopic, ClientRegistry } from "../core/api";

export const RegistryContext = createContext<ClientRegistry | null>(null);

export function useRegistry(): ClientRegistry {
  const registry = useContext(RegistryContext);
  if (!registry) throw new Error("CodeDeck: no registry");
  return registry;
}

export interface ChangeFilter {
  bridgeId?: string;
  sessionId?: string;
  topics?: ChangeTopic[];
}

function matches(filter: ChangeFilter, change: Change): boolean {
  if (filter.bridgeId !== undefined && change.bridgeId !== filter.bridgeId && change.topic !== "bridges") return false;
  if (filter.topics && !filter.topics.includes(change.topic)) return false;
  if (filter.sessionId !== undefined && change.sessionId !== undefined && change.sessionId !== filter.sessionId) return false;
  return true;
}

/** A number that grows whenever a matching change arrived; re-renders the caller once per frame. */
export function useChanges(filter: ChangeFilter): number {
  const registry = useRegistry();
  const [version, setVersion] = useState(0);
  const key = `${filter.bridgeId ?? ""}|${filter.sessionId ?? ""}|${(filter.topics ?? []).join(",")}`;
  // A layout effect subscribes in the same task as the render that read the state, so no change
  // can slip in between (a plain effect runs after paint, when a relay message may already have
  // changed what this render showed).
  useLayoutEffect(() => {
    let frame = 0;
    const off = registry.subscribe((change) => {
      if (!matches(filter, change) || frame) return;
      frame = requestAnimationFrame(() => {
        frame = 0;
        setVersion((v) => v + 1);
      });
    });
    return () => {
      off();
      if (frame) cancelAnimationFrame(frame);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [registry, key]);
  return version;
}

/** The client of `bridgeId`, followed for the given topics. */
export function useBridge(bridgeId: string, topics: ChangeTopic[], sessionId?: string): BridgeClient | undefined {
  const registry = useRegistry();
  useChanges({ bridgeId, topics: [...topics, "bridges"], sessionId });
  return registry.get(bridgeId);
}

/** A promise-returning action with its busy flag and the message of its last failure. */
export function useAction(): [boolean, string | null, (run: () => Promise<unknown>) => Promise<boolean>] {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = async (action: () => Promise<unknown>): Promise<boolean> => {
    setBusy(true);
    setError(null);
    try {
      await action();
      return true;
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
      return false;
    } finally {
      setBusy(false);
    }
  };
  return [busy, error, run];
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
