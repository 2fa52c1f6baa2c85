// The header logic, driven the way OpenClaw 2026.9.6 drives it: the hook sequences below are the ones
// its gateway emitted for a user turn, `sessions compact` and `system event --mode now` (recorded with this
// plugin's debug_log), and the stream wrapper is called with the options OpenClaw passes.
import assert from "node:assert/strict";
import { test } from "node:test";

import { parseConfig, normalizeEndpoint } from "../src/config.js";
import { createWrapper, registerPlugin, type PluginApi } from "../src/index.js";
import { TurnTracker, classifyRun, mergeHeaders } from "../src/tracker.js";

let counter = 0;
const tracker = () => new TurnTracker({ newId: () => `id${++counter}` });

function userRun(t: TurnTracker, sessionId: string, runId: string) {
  for (const _hook of ["before_model_resolve", "agent_turn_prepare", "before_prompt_build", "before_agent_run", "llm_input"]) {
    t.runStarted({ runId, sessionId, trigger: "user" });
  }
}

test("a user's turn is main, on its session, with the run as turn id", () => {
  const t = tracker();
  userRun(t, "sessA", "run-1");
  assert.deepEqual(t.headersFor({ sessionId: "sessA" }), {
    "X-Session-Id": "openclaw:sessA", "X-Turn-Type": "main", "X-Turn-Reason": "user", "X-Turn-Id": "run-1",
  });
});

test("tool follow-ups of the same run stay main with the same turn id; the next message is a new turn", () => {
  const t = tracker();
  userRun(t, "sessA", "run-1");
  const first = t.headersFor({ sessionId: "sessA" });
  // the tool loop's next model call: OpenClaw fires only model_call_started (same run id) before it
  t.runStarted({ runId: "run-1", sessionId: "sessA" });
  const followUp = t.headersFor({ sessionId: "sessA" });
  assert.equal(followUp["X-Turn-Type"], "main");
  assert.equal(followUp["X-Turn-Id"], first["X-Turn-Id"]);
  userRun(t, "sessA", "run-2");
  assert.equal(t.headersFor({ sessionId: "sessA" })["X-Turn-Id"], "run-2");
});

test("compaction is a side turn of the session it compacts, even without options.sessionId", () => {
  const t = tracker();
  userRun(t, "sessG", "run-1");
  userRun(t, "sessH", "run-9"); // another session: the fallback must pick the compacting one, not guess
  t.compactionStarted("sessG");
  const headers = t.headersFor({ sessionId: undefined });
  assert.equal(headers["X-Session-Id"], "openclaw:sessG");
  assert.equal(headers["X-Turn-Type"], "side");
  assert.equal(headers["X-Turn-Reason"], "compaction");
  assert.match(headers["X-Turn-Id"], /^compaction-/);
  t.compactionEnded("sessG");
  // after it, the session's turns are what their runs say again
  userRun(t, "sessG", "run-2");
  assert.equal(t.headersFor({ sessionId: "sessG" })["X-Turn-Type"], "main");
});

test("a heartbeat is side on the session it wakes, from its trigger or the heartbeat hook alone", () => {
  const t = tracker();
  userRun(t, "sessG", "run-1");
  t.runStarted({ runId: "hb-1", sessionId: "sessG", trigger: "heartbeat" });
  assert.deepEqual(t.headersFor({ sessionId: "sessG" }), {
    "X-Session-Id": "openclaw:sessG", "X-Turn-Type": "side", "X-Turn-Reason": "heartbeat", "X-Turn-Id": "hb-1",
  });
  // without conversation access OpenClaw withholds the trigger; heartbeat_prompt_contribution still fires
  const u = tracker();
  u.runStarted({ runId: "hb-2", sessionId: "main-uuid" }); // model_call_started of an earlier call
  u.heartbeat("main-uuid");
  const headers = u.headersFor({ sessionId: "main-uuid" });
  assert.equal(headers["X-Turn-Type"], "side");
  assert.equal(headers["X-Turn-Reason"], "heartbeat");
  // and a later hook of the same heartbeat run cannot turn it back into main
  u.runStarted({ runId: "hb-2", sessionId: "main-uuid", trigger: "user" });
  assert.equal(u.headersFor({ sessionId: "main-uuid" })["X-Turn-Type"], "side");
});

test("system-originated runs are side; a direct completion (title, summary) is side", () => {
  assert.deepEqual(classifyRun({ trigger: "cron" }), ["side", "cron"]);
  assert.deepEqual(classifyRun({ trigger: "memory" }), ["side", "memory"]);
  assert.deepEqual(classifyRun({ trigger: "user", provenance: "internal_system" }), ["side", "internal-system"]);
  assert.deepEqual(classifyRun({ trigger: "user" }), ["main", "user"]);
  const t = tracker();
  const headers = t.headersFor({ sessionId: "s1", direct: true });
  assert.equal(headers["X-Turn-Type"], "side");
  assert.equal(headers["X-Turn-Reason"], "direct-completion");
});

test("what the hooks did not say is a header not sent", () => {
  const t = tracker();
  // nothing known: only the session id of the options
  assert.deepEqual(t.headersFor({ sessionId: "sessX" }), { "X-Session-Id": "openclaw:sessX" });
  // a run whose trigger we do not know: turn id, but no main/side (the server infers it)
  t.runStarted({ runId: "r", sessionId: "sessY", trigger: "something-new" });
  assert.deepEqual(t.headersFor({ sessionId: "sessY" }), { "X-Session-Id": "openclaw:sessY", "X-Turn-Id": "r" });
  // one session known, no session id in the options: that one (the one-shot CLI's case)
  assert.deepEqual(t.headersFor({ sessionId: undefined }), { "X-Session-Id": "openclaw:sessY", "X-Turn-Id": "r" });
  // two sessions known, no session id in the options, none compacting: no session header at all
  t.runStarted({ runId: "q", sessionId: "sessZ", trigger: "user" });
  assert.deepEqual(t.headersFor({ sessionId: undefined }), {});
  // session tracking off: no session id header
  const off = new TurnTracker({ sessionTracking: false });
  off.runStarted({ runId: "r1", sessionId: "s", trigger: "user" });
  assert.equal(off.headersFor({ sessionId: "s" })["X-Session-Id"], undefined);
});

test("a session's end never rides on a later request; what was known of it is forgotten", () => {
  const t = tracker();
  userRun(t, "sessA", "run-1");
  t.compactionStarted("sessA");
  t.sessionEnded("sessA");
  // a conversation that goes on under the same id (a reset that keeps it) is not ended after its first turn,
  // and is not taken for the old one's compaction
  userRun(t, "sessA", "run-2");
  assert.deepEqual(t.headersFor({ sessionId: "sessA" }), {
    "X-Session-Id": "openclaw:sessA", "X-Turn-Type": "main", "X-Turn-Reason": "user", "X-Turn-Id": "run-2",
  });
  // and nothing is guessed for a call without a session id after the only known session ended
  const u = tracker();
  userRun(u, "sessB", "run-1");
  u.sessionEnded("sessB");
  assert.deepEqual(u.headersFor({ sessionId: undefined }), {});
});

test("a compaction that never reports its end does not make the session's later turns side", () => {
  const t = tracker();
  userRun(t, "sessA", "run-1");
  t.compactionStarted("sessA"); // an overflow compaction inside run-1 ...
  t.runStarted({ runId: "run-1", sessionId: "sessA", trigger: "user" }); // ... whose own calls stay compaction
  assert.equal(t.headersFor({ sessionId: "sessA" })["X-Turn-Reason"], "compaction");
  // ... fails: no after_compaction. A heartbeat run does not close it either (it is not a person's turn) ...
  t.runStarted({ runId: "hb-1", sessionId: "sessA", trigger: "heartbeat" });
  assert.equal(t.headersFor({ sessionId: "sessA" })["X-Turn-Reason"], "compaction");
  // ... the person's next message does
  userRun(t, "sessA", "run-2");
  assert.deepEqual(t.headersFor({ sessionId: "sessA" }), {
    "X-Session-Id": "openclaw:sessA", "X-Turn-Type": "main", "X-Turn-Reason": "user", "X-Turn-Id": "run-2",
  });
});

test("the wrapper fails open: a throwing tracker sends the request unchanged", () => {
  const broken = { headersFor: () => { throw new Error("boom"); } } as unknown as TurnTracker;
  const seen: unknown[] = [];
  const inner = (_m: unknown, _c: unknown, options?: Record<string, unknown>) => { seen.push(options); return "stream"; };
  const logged: Record<string, unknown>[] = [];
  const wrapped = createWrapper(broken, false, (e) => logged.push(e))({ streamFn: inner })!;
  const options = { sessionId: "s", headers: { "X-Existing": "1" } };
  assert.equal(wrapped({}, {}, options), "stream");
  assert.deepEqual(seen[0], options);
  assert.equal(logged[0].event, "error");
  // and no stream function to wrap: no wrapper (OpenClaw keeps its own)
  assert.equal(createWrapper(broken, false, () => {})({}), undefined);
});

test("the wrapper adds our headers and keeps the request's own", () => {
  const t = tracker();
  userRun(t, "sessA", "run-1");
  let got: Record<string, unknown> | undefined;
  const inner = (_m: unknown, _c: unknown, options?: Record<string, unknown>) => { got = options; };
  createWrapper(t, false, () => {})({ streamFn: inner })!({}, {}, { sessionId: "sessA", headers: { "x-turn-type": "stale", "X-Other": "1" } });
  assert.deepEqual(got!.headers, {
    "X-Other": "1", "X-Session-Id": "openclaw:sessA", "X-Turn-Type": "main", "X-Turn-Reason": "user", "X-Turn-Id": "run-1",
  });
  assert.equal(got!.sessionId, "sessA");
  assert.deepEqual(mergeHeaders(undefined, { A: "1" }), { A: "1" });
});

test("registered hooks that throw cost nothing but a header", () => {
  const handlers = new Map<string, (event: any, ctx: any) => unknown>();
  let provider: Record<string, any> = {};
  const api: PluginApi = {
    pluginConfig: { rollout_endpoint: "http://127.0.0.1:30000", training_mode: "async", session_tracking: true },
    on: (hook, handler) => { handlers.set(hook, handler); },
    registerProvider: (p) => { provider = p; },
  };
  registerPlugin(api, {});
  assert.equal(provider.id, "rl-training");
  for (const hook of ["before_prompt_build", "heartbeat_prompt_contribution", "before_compaction", "after_compaction",
    "session_end", "model_call_started"]) {
    assert.ok(handlers.has(hook), hook);
    // a hook event OpenClaw might send in another shape: getters that throw
    const hostile = new Proxy({}, { get: () => { throw new Error("bad event"); } });
    assert.equal(handlers.get(hook)!(hostile, hostile), undefined);
  }
  let got: Record<string, unknown> | undefined;
  const stream = provider.wrapStreamFn({ streamFn: (_m: unknown, _c: unknown, o?: Record<string, unknown>) => { got = o; } });
  stream({}, {}, { sessionId: "s1" });
  assert.deepEqual(got!.headers, { "X-Session-Id": "openclaw:s1" });
});

test("training_mode off adds nothing; config follows the guide's keys", () => {
  const api: PluginApi = {
    pluginConfig: { rollout_endpoint: "http://h:30000/v1/", training_mode: "off" },
    on: () => { throw new Error("no hooks when off"); },
    registerProvider: (p) => { assert.equal((p as any).wrapStreamFn({ streamFn: () => {} }), undefined); },
  };
  registerPlugin(api, {});
  const cfg = parseConfig({ rollout_endpoint: "http://h:30000", session_tracking: false }, {});
  assert.equal(cfg.rolloutEndpoint, "http://h:30000/v1");
  assert.equal(cfg.trainingMode, "async");
  assert.equal(cfg.sessionTracking, false);
  assert.equal(normalizeEndpoint("http://h/v1"), "http://h/v1");
});

test("test_faults: throwing hooks and a throwing header computation still send the request", () => {
  for (const faults of [["hooks"], ["headers"], ["hooks", "headers"]]) {
    const handlers = new Map<string, (event: any, ctx: any) => unknown>();
    let provider: Record<string, any> = {};
    registerPlugin({
      pluginConfig: { test_faults: faults },
      on: (hook, handler) => { handlers.set(hook, handler); },
      registerProvider: (p) => { provider = p; },
    }, {});
    assert.equal(handlers.get("before_prompt_build")!({}, { sessionId: "s", runId: "r", trigger: "user" }), undefined);
    let got: Record<string, unknown> | undefined;
    const options = { sessionId: "s" };
    provider.wrapStreamFn({ streamFn: (_m: unknown, _c: unknown, o?: Record<string, unknown>) => { got = o; } })({}, {}, options);
    // hooks failed: the session id from the options is all we know; headers failed: nothing is added
    assert.deepEqual(got, faults.includes("headers") ? options : { sessionId: "s", headers: { "X-Session-Id": "openclaw:s" } });
  }
});

test("session_end tells the server directly, with the provider's key, and never rejects", async () => {
  const http = await import("node:http");
  const received: { url?: string; auth?: string; body: string }[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => { body += c; });
    req.on("end", () => { received.push({ url: req.url, auth: req.headers.authorization, body }); res.end("{}"); });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  try {
    const handlers = new Map<string, (event: any, ctx: any) => unknown>();
    registerPlugin({
      config: { models: { providers: { "rl-training": { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: "sk-1" } } } },
      pluginConfig: {},
      on: (hook, handler) => { handlers.set(hook, handler); },
      registerProvider: () => {},
    }, {});
    await handlers.get("session_end")!({ sessionId: "sessA", reason: "deleted" }, {});
    assert.deepEqual(received, [{ url: "/v1/sessions/done", auth: "Bearer sk-1", body: JSON.stringify({ session_id: "openclaw:sessA" }) }]);
  } finally {
    server.close();
  }
  // a server that is not there: the hook still resolves
  const handlers = new Map<string, (event: any, ctx: any) => unknown>();
  registerPlugin({ pluginConfig: { rollout_endpoint: `http://127.0.0.1:${port}` }, on: (h, f) => { handlers.set(h, f); },
    registerProvider: () => {} }, {});
  assert.equal(await handlers.get("before_reset")!({ sessionId: "s" }, {}), undefined);
});
