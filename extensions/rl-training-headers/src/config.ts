// The plugin's configuration (`plugins.entries["rl-training-headers"].config` in openclaw.json), in the usage
// guide's shape: rollout_endpoint, training_mode, session_tracking.

export const PLUGIN_ID = "rl-training-headers";
export const PROVIDER_ID = "rl-training";

export interface PluginConfig {
  // the server's OpenAI-compatible base URL, ending in /v1: the guide's key, kept for the log (the requests go
  // to models.providers["rl-training"].baseUrl, which openclaw-config --plugin writes with the same URL)
  rolloutEndpoint?: string;
  trainingMode: "async" | "off"; // off: no headers at all (the server infers everything)
  sessionTracking: boolean; // false: no X-Session-Id (turn headers still go out)
  sessionPrefix: string;
  debugLog?: string; // a file that gets one JSON line per decision (tests, troubleshooting)
  // fault injection for the fail-open tests: "hooks" makes every hook handler throw, "headers" the header
  // computation; the request must still go out
  testFaults: string[];
}

export const CONFIG_SCHEMA = {
  type: "object",
  additionalProperties: false,
  properties: {
    rollout_endpoint: { type: "string", description: "OpenAI-compatible base URL of the OpenClaw-RL server, e.g. http://127.0.0.1:30000/v1" },
    training_mode: { type: "string", enum: ["async", "off"], default: "async" },
    session_tracking: { type: "boolean", default: true },
    session_prefix: { type: "string", default: "openclaw:" },
    debug_log: { type: "string" },
    test_faults: { type: "array", items: { type: "string", enum: ["hooks", "headers"] } },
  },
} as const;

/** The base URL with exactly one trailing /v1 (the guide writes the server root or the /v1 URL). */
export function normalizeEndpoint(url: string): string {
  const trimmed = url.trim().replace(/\/+$/, "");
  return trimmed.endsWith("/v1") ? trimmed : `${trimmed}/v1`;
}

export function parseConfig(raw: unknown, env: Record<string, string | undefined> = {}): PluginConfig {
  const cfg = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const str = (key: string) => (typeof cfg[key] === "string" && (cfg[key] as string).trim() ? (cfg[key] as string).trim() : undefined);
  const endpoint = str("rollout_endpoint");
  const mode = str("training_mode") === "off" ? "off" : "async";
  return {
    rolloutEndpoint: endpoint ? normalizeEndpoint(endpoint) : undefined,
    trainingMode: mode,
    sessionTracking: cfg.session_tracking !== false,
    sessionPrefix: typeof cfg.session_prefix === "string" ? cfg.session_prefix : "openclaw:",
    debugLog: str("debug_log") ?? env.RL_TRAINING_HEADERS_DEBUG_LOG,
    testFaults: Array.isArray(cfg.test_faults) ? (cfg.test_faults as unknown[]).map(String) : [],
  };
}
