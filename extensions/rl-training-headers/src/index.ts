// OpenClaw plugin entry: the `rl-training` provider (an OpenClaw-RL server, OpenAI-compatible) whose every
// model request carries X-Session-Id / X-Turn-Id / X-Turn-Type (see tracker.ts); a session OpenClaw ends is
// reported to the server's POST /v1/sessions/done.
//
// Two OpenClaw seams (docs/plugins/sdk-provider-plugins/runtime-hooks.md, docs/plugins/hooks/prompt-and-session.md):
// agent hooks (before_prompt_build, llm_input, heartbeat_prompt_contribution, before/after_compaction,
// session_end, before_reset) tell the tracker what each session's current run is; the provider's
// wrapStreamFn / wrapSimpleCompletionStreamFn add the tracker's headers to the request options. The body is
// never touched. Every hook and wrapper is wrapped in `guarded`: an exception in this plugin costs a header,
// never the request.

import { appendFileSync } from "node:fs";

import { CONFIG_SCHEMA, PLUGIN_ID, PROVIDER_ID, normalizeEndpoint, parseConfig, type PluginConfig } from "./config.js";
import { TurnTracker, mergeHeaders, type RequestContext } from "./tracker.js";

// The slice of OpenClaw's plugin API this plugin uses (openclaw/plugin-sdk's OpenClawPluginApi and
// ProviderPlugin). Declared here instead of imported so the plugin builds without the 700 MB openclaw
// package; the e2e test (tests/e2e/test_openclaw_plugin.py) checks it against the real host.
type StreamOptions = { sessionId?: string; headers?: Record<string, string>; [key: string]: unknown };
type StreamFn = (model: unknown, context: unknown, options?: StreamOptions) => unknown;
type HookCtx = { runId?: string; sessionId?: string; trigger?: string; inputProvenance?: { kind?: string } };
type Logger = { info?: (msg: string) => void; warn?: (msg: string) => void; debug?: (msg: string) => void };
export interface PluginApi {
  config?: unknown;
  pluginConfig?: Record<string, unknown>;
  logger?: Logger;
  on: (hook: string, handler: (event: any, ctx: any) => unknown) => void;
  registerProvider: (provider: Record<string, unknown>) => void;
}

export function createWrapper(tracker: TurnTracker, direct: boolean, log: (event: Record<string, unknown>) => void) {
  return (ctx: { streamFn?: StreamFn }): StreamFn | undefined => {
    const inner = ctx?.streamFn;
    if (!inner) return undefined;
    return (model, context, options) => {
      let headers: Record<string, string> = {};
      try {
        const request: RequestContext = { sessionId: options?.sessionId, direct };
        headers = tracker.headersFor(request);
        log({ event: "request", direct, sessionId: options?.sessionId ?? null, headers });
      } catch (err) {
        log({ event: "error", where: "headersFor", error: String(err) });
        headers = {};
      }
      if (Object.keys(headers).length === 0) return inner(model, context, options);
      return inner(model, context, { ...options, headers: mergeHeaders(options?.headers, headers) });
    };
  };
}

type ProviderEntry = { baseUrl?: unknown; apiKey?: unknown };
function providerEntry(config: unknown): ProviderEntry | undefined {
  const providers = (config as { models?: { providers?: Record<string, ProviderEntry> } } | undefined)?.models?.providers;
  return providers?.[PROVIDER_ID];
}
function providerBaseUrl(config: unknown): string | undefined {
  const url = providerEntry(config)?.baseUrl;
  return typeof url === "string" ? url : undefined;
}
// the provider's key, when it is a plain string (a secret reference is OpenClaw's to resolve, not ours)
function providerApiKey(config: unknown): string | undefined {
  const key = providerEntry(config)?.apiKey;
  return typeof key === "string" && key ? key : undefined;
}

export function registerPlugin(api: PluginApi, env: Record<string, string | undefined> = process.env): TurnTracker {
  const config: PluginConfig = parseConfig(api.pluginConfig, env);
  const tracker = new TurnTracker({ sessionPrefix: config.sessionPrefix, sessionTracking: config.sessionTracking });
  const log = (event: Record<string, unknown>) => {
    if (!config.debugLog) return;
    try {
      appendFileSync(config.debugLog, JSON.stringify({ t: Date.now(), ...event }) + "\n");
    } catch {
      // a debug log that cannot be written is not worth a failed request
    }
  };
  const guarded = (name: string, fn: (event: any, ctx: any) => void) => (event: any, ctx: any) => {
    try {
      if (config.testFaults.includes("hooks")) throw new Error(`test fault in ${name}`);
      fn(event ?? {}, ctx ?? {});
    } catch (err) {
      log({ event: "error", where: name, error: String(err) });
      api.logger?.warn?.(`${PLUGIN_ID}: ${name} hook failed (request goes out without that header): ${err}`);
    }
    return undefined;
  };
  const run = (ctx: HookCtx, event: { runId?: string; sessionId?: string } = {}) => ({
    runId: ctx.runId ?? event.runId,
    sessionId: ctx.sessionId ?? event.sessionId,
    trigger: ctx.trigger,
    provenance: ctx.inputProvenance?.kind,
  });

  if (config.trainingMode !== "off") {
    for (const hook of ["before_model_resolve", "agent_turn_prepare", "before_prompt_build", "before_agent_run", "llm_input"]) {
      api.on(hook, guarded(hook, (event, ctx: HookCtx) => {
        const info = run(ctx, event);
        tracker.runStarted(info);
        log({ event: "hook", hook, ...info });
      }));
    }
    // no conversation-access gate on these: the run id reaches us even where the gated hooks above are off
    api.on("model_call_started", guarded("model_call_started", (event, ctx: HookCtx) => {
      const info = { runId: event.runId ?? ctx.runId, sessionId: event.sessionId ?? ctx.sessionId };
      tracker.runStarted(info);
      log({ event: "hook", hook: "model_call_started", callId: event.callId, ...info });
    }));
    api.on("heartbeat_prompt_contribution", guarded("heartbeat_prompt_contribution", (event, ctx: HookCtx) => {
      tracker.heartbeat(ctx.sessionId ?? event.sessionId, ctx.runId ?? event.runId);
      log({ event: "hook", hook: "heartbeat_prompt_contribution", sessionId: ctx.sessionId ?? event.sessionId });
    }));
    api.on("before_compaction", guarded("before_compaction", (event, ctx: HookCtx) => {
      tracker.compactionStarted(ctx.sessionId ?? event.sessionId);
      log({ event: "hook", hook: "before_compaction", sessionId: ctx.sessionId ?? event.sessionId });
    }));
    api.on("after_compaction", guarded("after_compaction", (event, ctx: HookCtx) => {
      tracker.compactionEnded(ctx.sessionId ?? event.sessionId, event.previousSessionId);
      log({ event: "hook", hook: "after_compaction", sessionId: ctx.sessionId ?? event.sessionId });
    }));
    for (const hook of ["session_end", "before_reset"]) {
      api.on(hook, (event: any, ctx: any) => {
        let sessionId: string | undefined;
        guarded(hook, (e, c: HookCtx) => {
          sessionId = e.sessionId ?? c.sessionId;
          tracker.sessionEnded(sessionId);
          log({ event: "hook", hook, sessionId, reason: e.reason });
        })(event, ctx);
        // OpenClaw knows a session ended only after its last request: tell the server directly. Returned so a
        // one-shot CLI can wait for it; never rejects.
        return sessionId && config.sessionTracking ? notifySessionDone(sessionId) : undefined;
      });
    }
  }

  const headerSource = config.testFaults.includes("headers")
    ? ({ headersFor: () => { throw new Error("test fault in headersFor"); } } as unknown as TurnTracker)
    : tracker;
  let warnedEndpoint = false;
  const notifySessionDone = async (sessionId: string): Promise<void> => {
    try {
      const endpoint = config.rolloutEndpoint ?? providerBaseUrl(api.config);
      if (!endpoint) return;
      const url = `${normalizeEndpoint(endpoint)}/sessions/done`;
      const apiKey = providerApiKey(api.config);
      const resp = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) },
        body: JSON.stringify({ session_id: tracker.sessionPrefix + sessionId }),
        signal: AbortSignal.timeout(5000),
      });
      log({ event: "session_done", sessionId, url, status: resp.status });
    } catch (err) {
      log({ event: "error", where: "session_done", error: String(err) });
    }
  };
  const wrap = (direct: boolean) => {
    const factory = createWrapper(headerSource, direct, log);
    return (ctx: { streamFn?: StreamFn; model?: { baseUrl?: string } }) => {
      if (config.trainingMode === "off") return undefined;
      try {
        // the requests go where models.providers says; a different rollout_endpoint is a config slip worth a word
        const baseUrl = ctx?.model?.baseUrl;
        if (!warnedEndpoint && config.rolloutEndpoint && baseUrl && normalizeEndpoint(baseUrl) !== config.rolloutEndpoint) {
          warnedEndpoint = true;
          api.logger?.warn?.(`${PLUGIN_ID}: rollout_endpoint ${config.rolloutEndpoint} is not the provider's baseUrl ${baseUrl}`);
          log({ event: "warning", rolloutEndpoint: config.rolloutEndpoint, baseUrl });
        }
        return factory(ctx);
      } catch (err) {
        log({ event: "error", where: "wrapStreamFn", error: String(err) });
        return undefined;
      }
    };
  };

  api.registerProvider({
    id: PROVIDER_ID,
    label: "OpenClaw-RL server",
    docsPath: "/providers/rl-training",
    // no catalog: the provider's URL and models are `models.providers["rl-training"]` in openclaw.json (what
    // `python -m slime.conversation openclaw-config --plugin` writes); this registration owns its runtime hooks
    auth: [],
    wrapStreamFn: wrap(false),
    wrapSimpleCompletionStreamFn: wrap(true),
  });
  log({ event: "registered", config });
  return tracker;
}

export default {
  id: PLUGIN_ID,
  name: "RL training headers",
  description: "Tags every model request to an OpenClaw-RL server with its session, turn and main/side kind",
  configSchema: CONFIG_SCHEMA,
  register(api: PluginApi) {
    registerPlugin(api);
  },
};
