// A page that exposes the core to a driving script (live.mjs): no UI, only `window.core`.
import { openRegistry } from "../../src/core/index";
(globalThis as unknown as { core: unknown }).core = { openRegistry };
