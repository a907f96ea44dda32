// The core's entry point for the UI: `openRegistry` and the contract's types (api.ts).
export { openRegistry } from "./registry";
export type * from "./api";
