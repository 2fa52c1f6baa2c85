// Which session and turn a model request belongs to, from what OpenClaw's hooks told us before it.
//
// The provider stream wrapper (index.ts) only sees the request's options (`sessionId`); whether the call is a
// user's turn, a heartbeat, a cron job or a compaction summary is known to the agent hooks that ran before
// it. This module keeps that per session and turns it into the headers the OpenClaw-RL server reads:
//
//   X-Session-Id   the OpenClaw session id, with `sessionPrefix` in front ("openclaw:" by default: the id the
//                  server infers from the request's Runtime line, so a session is stored under the same id
//                  with or without this plugin)
//   X-Turn-Id      the agent run: one user message (or heartbeat, cron job, ...) and every model call of its
//                  tool loop share it; a compaction or other direct completion gets an id of its own
//   X-Turn-Type    main | side: only runs a person started are main; heartbeat, cron, memory and other
//                  system-originated runs, compaction summaries and direct (title, summary) completions are
//                  side
//   X-Turn-Reason  why (user, heartbeat, compaction, ...): for the server's log and stats, never needed
//
// X-Session-Done is not sent: the server ends a session after the request that carries it, and OpenClaw learns a
// session ended (session_end, before_reset) only after its last request. A header on the next request would end
// whatever conversation comes next under the same id after its first turn; index.ts calls the server's
// `POST /v1/sessions/done` instead (and the server's idle TTL ends a session whose notice was lost).
//
// Fail open: a value we do not know is a header we do not send. The server then infers that part from the
// request body, as it does for a client without this plugin.

export type TurnType = "main" | "side";

// Run triggers (PluginHookAgentContext.trigger) that mean a person asked for this run.
const MAIN_TRIGGERS = new Set(["user", "manual", "cli", "control-ui"]);
// System-originated runs: the model talks to OpenClaw itself, not to a person whose reply could judge it.
const SIDE_TRIGGERS = new Set(["heartbeat", "cron", "memory", "overflow", "timeout_recovery", "budget", "campaign",
  "diagnostics", "doctor-fix", "after-eviction"]);

export interface RunInfo {
  runId?: string;
  sessionId?: string;
  trigger?: string;
  provenance?: string; // inputProvenance.kind: external_user | inter_session | internal_system
  heartbeat?: boolean;
}

interface SessionState {
  runId?: string;
  turnType?: TurnType;
  reason?: string;
  compacting: number; // compactions in progress (before_compaction .. after_compaction)
  compactionTurnId?: string;
  compactionRunId?: string; // the run in flight when the compaction started
}

export interface TrackerOptions {
  sessionPrefix?: string;
  sessionTracking?: boolean; // false: send no session id (the server infers it)
  maxSessions?: number;
  newId?: () => string;
}

export interface RequestContext {
  sessionId?: string; // StreamOptions.sessionId of the model call
  direct?: boolean; // a direct completion (completeSimple: titles, summaries), not an agent run
}

export class TurnTracker {
  readonly sessionPrefix: string;
  readonly sessionTracking: boolean;
  private readonly maxSessions: number;
  private readonly newId: () => string;
  private readonly sessions = new Map<string, SessionState>();
  // the session of the most recent run: used for a call whose options carry no sessionId only while it is
  // the one session with a run in flight (a guess across sessions would be worse than no header)
  private lastSession?: string;

  constructor(options: TrackerOptions = {}) {
    this.sessionPrefix = options.sessionPrefix ?? "openclaw:";
    this.sessionTracking = options.sessionTracking ?? true;
    this.maxSessions = options.maxSessions ?? 1024;
    this.newId = options.newId ?? (() => Math.random().toString(16).slice(2, 14));
  }

  private state(sessionId: string): SessionState {
    let state = this.sessions.get(sessionId);
    if (state === undefined) {
      state = { compacting: 0 };
      this.sessions.set(sessionId, state);
      while (this.sessions.size > this.maxSessions) {
        // Map iterates in insertion order; refreshed sessions are re-inserted below, so this is the LRU
        const oldest = this.sessions.keys().next().value as string;
        this.sessions.delete(oldest);
      }
    } else {
      this.sessions.delete(sessionId);
      this.sessions.set(sessionId, state);
    }
    return state;
  }

  /** An agent run is about to call the model (before_prompt_build / before_agent_run / llm_input). */
  runStarted(run: RunInfo): void {
    if (!run.sessionId) return;
    const state = this.state(run.sessionId);
    this.lastSession = run.sessionId;
    if (run.runId && state.runId !== run.runId) {
      state.runId = run.runId;
      state.turnType = undefined;
      state.reason = undefined;
    }
    const [turnType, reason] = classifyRun(run);
    if (state.compacting && turnType === "main" && run.runId && run.runId !== state.compactionRunId) {
      // a person's next run: a compaction still open here failed without after_compaction (which is the only
      // other thing that closes it); left open it would tag every later turn of the session as side
      this.clearCompaction(state);
    }
    // a later hook of the same run may know more (the heartbeat contribution hook), never less
    if (turnType !== undefined && (state.turnType === undefined || turnType === "side")) {
      state.turnType = turnType;
      state.reason = reason;
    }
  }

  /** heartbeat_prompt_contribution: this run is a heartbeat, whatever its trigger said. */
  heartbeat(sessionId: string | undefined, runId?: string): void {
    this.runStarted({ sessionId, runId, heartbeat: true });
  }

  compactionStarted(sessionId: string | undefined): void {
    if (!sessionId) return;
    const state = this.state(sessionId);
    this.lastSession = sessionId;
    state.compacting += 1;
    state.compactionTurnId ??= `compaction-${this.newId()}`;
    state.compactionRunId ??= state.runId;
  }

  compactionEnded(sessionId: string | undefined, previousSessionId?: string): void {
    for (const id of [sessionId, previousSessionId]) {
      if (!id) continue;
      const state = this.sessions.get(id);
      if (state === undefined) continue;
      state.compacting = Math.max(0, state.compacting - 1);
      if (state.compacting === 0) this.clearCompaction(state);
    }
  }

  private clearCompaction(state: SessionState): void {
    state.compacting = 0;
    state.compactionTurnId = undefined;
    state.compactionRunId = undefined;
  }

  /** session_end / before_reset: OpenClaw is done with this session; what we knew of its runs is stale. */
  sessionEnded(sessionId: string | undefined): void {
    if (!sessionId) return;
    this.sessions.delete(sessionId);
    if (this.lastSession === sessionId) this.lastSession = undefined;
  }

  /** The headers for one model request. Never throws: a missing value is a missing header. */
  headersFor(request: RequestContext): Record<string, string> {
    const headers: Record<string, string> = {};
    const sessionId = request.sessionId || this.soleSession();
    const state = sessionId ? this.sessions.get(sessionId) : undefined;
    if (sessionId && this.sessionTracking) headers["X-Session-Id"] = this.sessionPrefix + sessionId;
    if (state?.compacting) {
      // the compaction summary: side, on the session it compacts
      headers["X-Turn-Type"] = "side";
      headers["X-Turn-Reason"] = "compaction";
      if (state.compactionTurnId) headers["X-Turn-Id"] = state.compactionTurnId;
    } else if (request.direct) {
      // completeSimple callers (titles, summaries, `sessions compact` outside a run): never a user's turn
      headers["X-Turn-Type"] = "side";
      headers["X-Turn-Reason"] = "direct-completion";
      headers["X-Turn-Id"] = `direct-${this.newId()}`;
    } else if (state !== undefined) {
      if (state.turnType) {
        headers["X-Turn-Type"] = state.turnType;
        if (state.reason) headers["X-Turn-Reason"] = state.reason;
      }
      if (state.runId) headers["X-Turn-Id"] = state.runId;
    }
    return headers;
  }

  // A call without options.sessionId: OpenClaw's compaction summary is one (its hooks named the session,
  // the stream call does not). Only an unambiguous answer counts: the one session compacting right now,
  // else the one session we know at all.
  private soleSession(): string | undefined {
    const compacting = [...this.sessions].filter(([, state]) => state.compacting > 0).map(([id]) => id);
    if (compacting.length === 1) return compacting[0];
    if (compacting.length === 0 && this.sessions.size === 1) return this.lastSession;
    return undefined;
  }
}

/** main/side and why for a run, or [undefined, undefined] when the hooks did not say. */
export function classifyRun(run: RunInfo): [TurnType | undefined, string | undefined] {
  if (run.heartbeat) return ["side", "heartbeat"];
  const trigger = run.trigger?.trim().toLowerCase();
  if (trigger && SIDE_TRIGGERS.has(trigger)) return ["side", trigger];
  if (run.provenance === "internal_system") return ["side", "internal-system"];
  if (run.provenance === "inter_session") return ["side", "inter-session"];
  if (trigger && MAIN_TRIGGERS.has(trigger)) return ["main", trigger];
  if (run.provenance === "external_user") return ["main", "user"];
  return [undefined, undefined];
}

/** Headers merged into a request's own: ours win for our names, theirs stay otherwise. */
export function mergeHeaders(existing: Record<string, string> | undefined,
  ours: Record<string, string>): Record<string, string> {
  const merged: Record<string, string> = {};
  const ourNames = new Set(Object.keys(ours).map((name) => name.toLowerCase()));
  for (const [name, value] of Object.entries(existing ?? {})) {
    if (!ourNames.has(name.toLowerCase())) merged[name] = value;
  }
  return { ...merged, ...ours };
}
