"""The conversation proxy's settings: one dataclass, one name and one default per option.

The trainer declares its conversation flags from these fields (`add_trainer_flags`), builds the settings
once from its parsed arguments (`from_trainer_args`) and hands them to the proxy as a JSON file in the run
directory (`write`); the proxy's own command line (`python -m slime.conversation serve`, for running it alone)
fills the same dataclass (`build_parser` / `from_cli`), starting from such a file when given `--settings`.
Keys never go into the file: the proxy reads them from its environment (`SECRETS`).
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SETTINGS_FILE = "conversation_settings.json"
# field -> environment variable the proxy reads it from (the trainer hands keys over this way, never in a file
# or on a command line, where `ps` would show them)
SECRETS = {"api_key": "OPENCLAW_PROXY_API_KEY", "engine_api_key": "SLIME_ENGINE_API_KEY",
           "judge_api_key": "SLIME_JUDGE_API_KEY"}


def option(default, help: str, *, aliases: tuple[str, ...] = (), trainer: bool = True, factory=None,
           metavar: str | None = None, env: str | None = None):
    """A settings field; its flag is `--field-name` for the trainer and the proxy alike. `aliases`: older
    spellings the proxy's own CLI also accepts; `trainer=False`: the trainer derives the value from its own
    arguments instead of taking a flag for it; `env`: a variable that, when set, replaces the default on
    either command line."""
    meta = {"help": help, "aliases": aliases, "trainer": trainer, "metavar": metavar, "env": env}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class ConversationSettings:
    # --- where it serves, what it serves ------------------------------------------------------------
    engine_url: str | None = option(
        None, "policy engine (SGLang protocol), e.g. http://127.0.0.1:30010", trainer=False)
    conversation_store: str | None = option(
        None, "SQLite store of turns, judgements and samples (created if missing; default <run dir>/conversations.db)",
        aliases=("--store",))
    proxy_host: str = option(
        "127.0.0.1", "bind address (env HOST); beyond loopback needs an API key ($OPENCLAW_PROXY_API_KEY)",
        aliases=("--host",), env="HOST")
    proxy_port: int = option(30000, "port (env PORT)", aliases=("--port",), env="PORT")
    served_model_name: str | None = option(
        None, "model name reported to clients (env SERVED_MODEL_NAME)", env="SERVED_MODEL_NAME")
    python_path: list[str] = option(
        None, "folders put first on sys.path before plugins load (the trainer's --extra-python-path)", trainer=False,
        factory=list)
    # --- the method and its judges -------------------------------------------------------------------
    conversation_method: str | None = option(
        None, "what judged turns become: a built-in method or a plugin 'module.path:factory' from a method folder "
              "(default: rl; slime/slime/conversation/methods/registry.py)", aliases=("--method",))
    conversation_method_options: dict = option(
        None, "JSON object of keyword arguments for a plugin method's factory", factory=dict, metavar="JSON")
    prm_type: str | None = option(
        None, "reward judge: llm | rules | embedding | rules+embedding | module.path:factory (default: llm when a "
              "judge engine is given (--prm-enable, --prm-engine-url), else rules+embedding)", aliases=("--judge",))
    prm_engine_url: str | None = option(
        None, "a running engine for the LLM judges and the teacher (default: the trainer starts one with "
              "--prm-enable, else the policy engine)", aliases=("--judge-engine-url",))
    prm_m: int = option(3, "votes per LLM judgement (env PRM_M)", env="PRM_M")
    prm_temperature: float = option(0.6, "sampling temperature of the LLM judges")
    prm_max_new_tokens: int = option(1024, "tokens an LLM judge may write per vote")
    prm_timeout: float = option(300.0, "seconds for one turn's whole judgement", aliases=("--judge-timeout",))
    prm_vote_timeout: float = option(120.0, "seconds for one LLM judge call", aliases=("--judge-vote-timeout",))
    prm_max_concurrency: int = option(4, "turns judged at once", aliases=("--judge-concurrency",))
    hint_judge_type: str = option(
        "rules", "hint judge of methods that use hints: llm | rules | rules+llm | module.path:factory",
        aliases=("--hint-judge",))
    hint_select: str = option(
        "longest", "among several accepted LLM hints: the longest (upstream), or the one whose teacher stays closest "
                   "to the student's own log-probs ('overlap')")
    # --- the teacher ---------------------------------------------------------------------------------
    teacher_engine_url: str | None = option(None, "engine that scores the hinted prompt (default: the judge "
                                                  "engine, else the policy engine = self-distillation)",
                                            trainer=False)
    teacher_temperature: float | None = option(None, "temperature of the teacher's log-probs: the trainer's "
                                                     "--rollout-temperature (default: --temperature, else 1.0)",
                                               trainer=False)
    distill_topk: int | None = option(None, "K of the teacher's top-K log-probs per token (recorded with each "
                                            "sample; the top-K losses need it)")
    teacher_demonstrations: int = option(0, "replies the hinted teacher writes itself per turn with an accepted "
                                            "hint, each trained as one more sample under the student's prompt "
                                            "(0: off)")
    teacher_demonstration_candidates: int | None = option(
        None, "replies the teacher writes per hinted turn, of which the --teacher-demonstrations with the highest "
              "hint log-ratio (teacher minus student log-prob, per token) are kept (default: as many as kept)")
    teacher_demonstration_tokens: int | None = option(
        None, "teacher-opened demonstrations: the teacher writes at most N tokens (the opening), the policy "
              "continues the reply from the student's prompt (default: the teacher writes whole replies)")
    teacher_demonstration_check: str = option(
        "answers", "which demonstrations are kept: 'answers' only those that still answer the request (a body beyond "
                   "the opening, on the request's topic; a turn whose teacher replies all fail while the policy's "
                   "own reply passes also loses its teacher term), 'none' every one")
    teacher_concurrency: int = option(3, "teacher requests at once (env OPENCLAW_OPD_TEACHER_LP_MAX_CONCURRENCY)",
                                      env="OPENCLAW_OPD_TEACHER_LP_MAX_CONCURRENCY")
    tokenizer_path: str | None = option(None, "policy tokenizer for teacher prompts (default: the engine's, from "
                                              "/get_model_info)", trainer=False)
    # --- requests ------------------------------------------------------------------------------------
    max_response_tokens: int | None = option(None, "cap on max_completion_tokens/max_tokens (the trainer's "
                                                   "--rollout-max-response-len)", trainer=False)
    temperature: float | None = option(None, "force this sampling temperature (the trainer's "
                                             "--rollout-temperature)", trainer=False)
    session_idle_ttl: float = option(1800.0, "seconds without a request after which a session ends")
    max_body_mb: float = option(32.0, "largest request body accepted", trainer=False)
    upstream_timeout: float = option(900.0, "seconds to wait for the engine's next bytes", trainer=False)
    log_level: str = option("info", "proxy log level (env OPENCLAW_DEBUG=1 or ROLLOUT_LOG_LEVEL=... win over it)",
                            trainer=False)
    # --- keys: from the environment only (see SECRETS) -----------------------------------------------
    api_key: str | None = option(None, "bearer key clients must send (env OPENCLAW_PROXY_API_KEY); required "
                                       "beyond loopback", trainer=False)
    engine_api_key: str | None = option(None, "key of the policy engine (env SLIME_ENGINE_API_KEY)", trainer=False)
    judge_api_key: str | None = option(None, "key of the judge/teacher engine (env SLIME_JUDGE_API_KEY)",
                                       trainer=False)

    # --- derived -----------------------------------------------------------------------------------
    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    def resolved_judge(self) -> str:
        return self.prm_type or ("llm" if self.prm_engine_url else "rules+embedding")

    def resolved_method(self) -> str:
        from slime.conversation.methods import DEFAULT_METHOD, canonical_method_name

        return canonical_method_name(self.conversation_method or DEFAULT_METHOD)

    def check(self) -> None:
        """Everything the proxy needs to serve (the trainer checks `check_values` before it derives the rest)."""
        if not self.engine_url:
            raise ValueError("the proxy needs the policy engine's URL (--engine-url)")
        if not self.conversation_store:
            raise ValueError("the proxy needs a store file (--conversation-store / --store)")
        if self.proxy_host not in LOOPBACK and not self.api_key:
            raise ValueError(f"refusing to bind {self.proxy_host}:{self.proxy_port} without an API key: anyone on "
                             "the network could use the model and inject training data. Set "
                             "$OPENCLAW_PROXY_API_KEY or --api-key (clients send it as 'Authorization: Bearer <key>').")
        self.check_values()

    def check_values(self) -> None:
        if self.hint_select not in ("longest", "overlap"):
            raise ValueError(f"--hint-select must be 'longest' or 'overlap', got {self.hint_select!r}")
        if self.teacher_demonstration_check not in ("answers", "none"):
            raise ValueError("--teacher-demonstration-check must be 'answers' or 'none', got "
                             f"{self.teacher_demonstration_check!r}")
        for name in ("prm_m", "prm_max_new_tokens", "prm_max_concurrency", "teacher_concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{flag_of(name)} must be >= 1, got {getattr(self, name)}")
        for name in ("prm_timeout", "prm_vote_timeout", "session_idle_ttl", "max_body_mb", "upstream_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{flag_of(name)} must be > 0, got {getattr(self, name)}")
        if self.distill_topk is not None and self.distill_topk < 1:
            raise ValueError(f"--distill-topk must be >= 1, got {self.distill_topk}")
        if self.teacher_demonstrations < 0:
            raise ValueError(f"--teacher-demonstrations must be >= 0, got {self.teacher_demonstrations}")
        if (self.teacher_demonstration_candidates is not None
                and self.teacher_demonstration_candidates < max(1, self.teacher_demonstrations)):
            raise ValueError(f"--teacher-demonstration-candidates {self.teacher_demonstration_candidates} is fewer "
                             f"than the --teacher-demonstrations kept ({self.teacher_demonstrations}, at least 1)")
        if self.teacher_demonstration_tokens is not None and self.teacher_demonstration_tokens < 1:
            raise ValueError(f"--teacher-demonstration-tokens must be >= 1, got {self.teacher_demonstration_tokens}")

    # --- the file the trainer hands over ---------------------------------------------------------------
    def write(self, path: str | Path) -> Path:
        """The settings as JSON, without the keys (the proxy reads those from its environment)."""
        data = {k: v for k, v in asdict(self).items() if k not in SECRETS}
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> "ConversationSettings":
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read conversation settings {path}: {exc}") from None
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"conversation settings {path}: unknown keys {unknown}")
        leaked = sorted(set(data) & set(SECRETS))
        if leaked:
            raise ValueError(f"conversation settings {path}: keys {leaked} belong in the environment, not a file")
        return cls(**data).with_secrets_from_env()

    def with_secrets_from_env(self) -> "ConversationSettings":
        for name, variable in SECRETS.items():
            if getattr(self, name) is None:
                setattr(self, name, os.environ.get(variable) or None)
        return self

    # --- the trainer's side -------------------------------------------------------------------------
    @classmethod
    def from_trainer_args(cls, args, **derived) -> "ConversationSettings":
        """The trainer's conversation flags (same names as here) plus values it derives (`derived`: engine
        URLs, the store path, ...). Keys come from the environment."""
        values = {f.name: getattr(args, f.name) for f in fields(cls)
                  if f.metadata["trainer"] and hasattr(args, f.name)}
        values.update(derived)
        return cls(**values).with_secrets_from_env()


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def _json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


_TYPES = {"int": int, "float": float, "str": str}


def _argument_kwargs(f) -> dict:
    kwargs = {"dest": f.name, "help": f.metadata["help"]}
    annotation = str(f.type).split("|")[0].strip()
    if f.name == "conversation_method_options":
        kwargs["type"] = _json_object
    elif f.name == "python_path":
        kwargs.update(nargs="+", action="extend")
    elif annotation in _TYPES and annotation != "str":
        kwargs["type"] = _TYPES[annotation]
    if f.name == "hint_select":
        kwargs["choices"] = ["longest", "overlap"]
    if f.name == "teacher_demonstration_check":
        kwargs["choices"] = ["answers", "none"]
    if f.metadata["metavar"]:
        kwargs["metavar"] = f.metadata["metavar"]
    return kwargs


def _default(f):
    """The field's default, or its environment variable's value when that is set (read now, not at import)."""
    variable = f.metadata["env"]
    raw = os.environ.get(variable) if variable else None
    if raw not in (None, ""):
        cast = _argument_kwargs(f).get("type", str)
        try:
            return cast(raw)
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            raise ValueError(f"${variable}={raw!r} is not a valid {flag_of(f.name)}") from None
    return f.default_factory() if f.default is MISSING else f.default


def defaults() -> ConversationSettings:
    """Every field at its default, with the environment variables of `option(env=...)` applied."""
    return ConversationSettings(**{f.name: _default(f) for f in fields(ConversationSettings)})


def add_trainer_flags(group) -> None:
    """The trainer's conversation flags: every field the trainer does not derive, with its default."""
    for f in fields(ConversationSettings):
        if f.metadata["trainer"]:
            group.add_argument(flag_of(f.name), default=_default(f), **_argument_kwargs(f))


def build_parser() -> argparse.ArgumentParser:
    """The proxy's own command line: every field (proxy spellings as aliases); unset flags keep the value
    from `--settings FILE`, else the field's default."""
    p = argparse.ArgumentParser(prog="python -m slime.conversation serve",
                                description="OpenAI-compatible conversation proxy that turns traffic into RL samples",
                                argument_default=argparse.SUPPRESS, allow_abbrev=False)
    p.add_argument("--settings", help=f"a settings file written by the trainer ({SETTINGS_FILE} in its run dir)")
    for f in fields(ConversationSettings):
        kwargs = _argument_kwargs(f)
        if f.name in SECRETS:
            kwargs["help"] += " (prefer the environment: a flag shows in `ps`)"
        p.add_argument(flag_of(f.name), *f.metadata["aliases"], **kwargs)
    return p


def from_cli(argv: list[str] | None = None) -> ConversationSettings:
    given = vars(build_parser().parse_args(argv))
    path = given.pop("settings", None)
    settings = ConversationSettings.read(path) if path else defaults()
    for name, value in given.items():
        setattr(settings, name, value)
    return settings.with_secrets_from_env()
