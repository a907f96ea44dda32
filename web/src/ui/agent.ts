// What a session's agent supports, from the heartbeat's `agents` (PROTOCOL.md §16). A bridge that
// lists no agents is a plain v10 bridge: Claude Code with the v10 vocabularies.
import type { AgentDescriptor, EffortLevel, MachineInfo, PermissionMode, RemoteSessionInfo, SessionState } from "../core/api";

export const MODES: PermissionMode[] = ["default", "acceptEdits", "plan"];
export const EFFORTS: EffortLevel[] = ["low", "medium", "high", "xhigh", "max", "auto"];

const V10_AGENT: AgentDescriptor = {
  id: "claude-code",
  label: "Claude Code",
  modes: [...MODES],
  efforts: [...EFFORTS],
  supports: { models: true, usage: true, providers: true, gsd: false, interrupt: true },
};

export function agentOf(machine: MachineInfo | null, info: RemoteSessionInfo): AgentDescriptor {
  const agents = machine?.agents ?? [];
  const id = info.agent ?? info.backend ?? "claude-code";
  return agents.find((a) => a.id === id) ?? (agents.length === 0 ? V10_AGENT : { ...V10_AGENT, id, label: id });
}

export function modesOf(agent: AgentDescriptor): PermissionMode[] {
  return MODES.filter((m) => agent.modes.includes(m));
}

export function effortsOf(agent: AgentDescriptor): EffortLevel[] {
  return EFFORTS.filter((e) => agent.efforts.includes(e));
}

export const MODE_LABEL: Record<PermissionMode, string> = { default: "Ask", acceptEdits: "Accept edits", plan: "Plan" };

export const STATE_LABEL: Record<SessionState, string> = {
  running: "running",
  waiting_permission: "waiting for you",
  waiting_question: "waiting for you",
  idle: "idle",
  offline: "offline",
};

export function stateClass(state: SessionState | undefined): string {
  if (state === "waiting_permission" || state === "waiting_question") return "waiting";
  return state ?? "idle";
}

export function sessionTitle(info: RemoteSessionInfo): string {
  return info.title?.trim() || info.slug || info.id.slice(0, 8);
}

export function ago(iso: string, now = Date.now()): string {
  const t = Date.parse(iso);
  if (!Number.isFinite(t)) return "";
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}
