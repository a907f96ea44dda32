import type { Presence } from "../core/api";

const WORDS: Record<Presence, string> = { online: "online", offline: "offline", connecting: "connecting" };

/** The bridge's presence as a coloured dot (with its word for screen readers). */
export function PresenceDot({ presence }: { presence: Presence }) {
  return (
    <span class={`dot p-${presence}`} data-testid="presence" data-presence={presence} title={WORDS[presence]}>
      <span class="vh">{WORDS[presence]}</span>
    </span>
  );
}
