// CodeDeck Web's entry: opens the core's registry (keys and transcripts in IndexedDB, relay
// connections) and renders the UI against it.
import { openRegistry } from "./core/index";
import { mountApp, mountFailure } from "./ui/app";

const root = document.getElementById("app");
if (root) {
  openRegistry().then(
    (registry) => mountApp(registry, root),
    (err: unknown) => mountFailure(err instanceof Error ? err.message : String(err), root),
  );
}
