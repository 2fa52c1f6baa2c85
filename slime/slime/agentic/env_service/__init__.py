"""The environment service: leased, sandboxed environments behind an HTTP contract (upstream's pool server and
router), shared by the terminal, SWE and GUI settings.

* `pool_server` — one server: leases, capacity (429 with a reason), idempotent allocate, a per-lease lock, the
  idle-TTL reaper, lease records on disk reaped at restart, a bearer key beyond loopback.
* `router` — several pool servers behind one URL, least-loaded.
* `providers` — what a lease holds (`command`: a sandbox and one `run_command` tool; settings add their own).
* `client` — `EnvClient`, retrying only what cannot run twice.
* `launch` — `EnvService`: start N pool servers (+ router) as child processes, or attach by `ENV_SERVER_URL`.
"""
