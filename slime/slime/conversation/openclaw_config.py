"""The `~/.openclaw/openclaw.json` that points the stock OpenClaw client at our server.

    python -m slime.conversation openclaw-config --url http://127.0.0.1:30000 [--write ~/.openclaw/openclaw.json]

Two profiles:

- `full`: OpenClaw as it ships. Its requests carry a ~43k-character system prompt (workspace files, skills,
  deferred-tool catalogue) and 12 tool schemas: 14,120 SmolLM2 tokens on the first turn of a new workspace
  (openclaw@2026.9.6, measured from stored requests), more than SmolLM2-135M's 8,192-token context.
- `lean` (the default when the served context is under 16k tokens): the settings OpenClaw documents for small
  local models, which shorten every request without patching the client. `contextInjection: "never"` and
  `skipBootstrap` drop the injected workspace files (AGENTS.md, SOUL.md, IDENTITY.md, USER.md, BOOTSTRAP.md:
  about 5k tokens), `skills: []` drops the skills list (about 2.4k), and the `minimal` tool profile without tool
  search leaves two small tool schemas instead of twelve (about 5.3k with the deferred catalogue). What is left
  is 2,170 SmolLM2 tokens per first request, so an 8k context holds the prompt, several turns of history and a
  512-token reply. Heartbeats are off: each one would be a full agent turn of CPU time.

The same dict is used by the e2e tests' OpenClaw harness, so what the tests run is what users get.
"""

from __future__ import annotations

import copy

PROVIDER_ID = "slime"
# the OpenClaw plugin extensions/rl-training-headers: its provider id, plugin id and the hooks it needs
PLUGIN_PROVIDER_ID = "rl-training"
PLUGIN_ID = "rl-training-headers"
# below this many tokens of context the full OpenClaw prompt does not fit with room for history and a reply
LEAN_BELOW_CONTEXT = 16384

LEAN_AGENT_DEFAULTS = {
    "contextInjection": "never",  # no workspace files injected into the system prompt
    "skipBootstrap": True,  # and none created in a new workspace
    "skills": [],  # no skills list
    "heartbeat": {"every": "0m"},  # no unprompted heartbeat turns
}
LEAN_TOOLS = {"profile": "minimal", "toolSearch": False}


def openclaw_config(base_url: str, model_id: str, *, api_key: str | None = None, context_window: int = 8192,
                    max_tokens: int = 512, lean: bool | None = None, workspace: str | None = None,
                    provider_id: str | None = None, plugin: bool = False, plugin_path: str | None = None,
                    session_tracking: bool = True, debug_log: str | None = None) -> dict:
    """An openclaw.json (as a dict) whose default model is `provider_id/model_id` on our server.

    base_url: the server root or its /v1 URL. lean: None picks by context_window (see LEAN_BELOW_CONTEXT).
    max_tokens becomes the `max_completion_tokens` of every request.

    plugin: also enable the rl-training-headers plugin (installed with `openclaw plugins install`, or loaded from
    `plugin_path`): the provider becomes its `rl-training`, and every request carries the session, turn and
    main/side headers. It needs `hooks.allowConversationAccess` (OpenClaw gates the hooks that see a run's
    trigger behind it); without that the plugin still sends the session id and the heartbeat/compaction kinds."""
    if provider_id is None:
        provider_id = PLUGIN_PROVIDER_ID if plugin else PROVIDER_ID
    url = base_url.rstrip("/")
    url = url if url.endswith("/v1") else url + "/v1"
    if lean is None:
        lean = context_window < LEAN_BELOW_CONTEXT
    defaults: dict = {"model": {"primary": f"{provider_id}/{model_id}"}}
    if workspace:
        defaults["workspace"] = workspace
    config: dict = {
        "agents": {"defaults": defaults},
        "models": {
            "mode": "merge",
            "providers": {
                provider_id: {
                    "baseUrl": url,
                    # OpenClaw wants a key for a custom provider; on loopback the server accepts any
                    "apiKey": api_key or "sk-local",
                    "api": "openai-completions",
                    "models": [{
                        "id": model_id,
                        "name": f"slime {model_id}",
                        "reasoning": False,
                        "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": int(context_window),
                        "maxTokens": int(max_tokens),
                    }],
                }
            },
        },
    }
    if lean:
        defaults.update(copy.deepcopy(LEAN_AGENT_DEFAULTS))
        config["tools"] = dict(LEAN_TOOLS)
    if plugin:
        plugin_config: dict = {"rollout_endpoint": url, "training_mode": "async", "session_tracking": session_tracking}
        if debug_log:
            plugin_config["debug_log"] = debug_log
        config["plugins"] = {
            "allow": [PLUGIN_ID],
            "entries": {PLUGIN_ID: {"enabled": True, "hooks": {"allowConversationAccess": True},
                                    "config": plugin_config}},
        }
        if plugin_path:
            config["plugins"]["load"] = {"paths": [plugin_path]}
    return config


def describe_server(base_url: str, api_key: str | None = None, timeout: float = 30.0) -> tuple[str, int | None]:
    """(model id, context length or None) from the server's /v1/models."""
    import httpx

    url = base_url.rstrip("/")
    url = url if url.endswith("/v1") else url + "/v1"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    resp = httpx.get(url + "/models", headers=headers, timeout=timeout)
    resp.raise_for_status()
    entry = resp.json()["data"][0]
    context = entry.get("max_model_len") or entry.get("context_length")
    return entry["id"], int(context) if context else None
