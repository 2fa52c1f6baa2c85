"""Data types shared by the rollout side and the trainer: one `Sample` is one trajectory and one training row."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


def _plain(value: Any) -> Any:
    """Tensors and numpy arrays (teacher log-probs are often attached as tensors) become nested lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _oldest_version(current: str | None, new: str) -> str:
    if current is None:
        return new
    if current.isdigit() and new.isdigit():
        return new if int(new) < int(current) else current
    # Versions that are not plain counters cannot be ordered, so the first one seen stands.
    return current


@dataclass
class PrefixCacheInfo:
    """Upstream's prefix-cache counters of a sample, summed over its generation calls (SGLang's `meta_info`)."""

    cached_tokens: int = 0
    total_prompt_tokens: int = 0

    def add(self, meta_info: dict[str, Any]) -> None:
        self.cached_tokens += int(meta_info.get("cached_tokens") or 0)
        self.total_prompt_tokens += int(meta_info.get("prompt_tokens") or 0)


_FINISH_REASON_STATUS = {
    "stop": "completed",
    "length": "truncated",
    "abort": "aborted",
}


@dataclass
class Sample:
    """One prompt plus one response, with everything the trainer needs to turn it into a training row.

    `tokens` holds the prompt tokens followed by the `response_length` response tokens; every per-token
    list (`loss_mask`, `rollout_log_probs`, teacher arrays) is aligned with the response part only.

    Attributes that are not declared fields (task-specific extras set with `setattr`) survive `to_dict` /
    `from_dict`: they are written next to the fields and restored as instance attributes.
    """

    class Status(str, Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    prompt: str | list[dict[str, Any]] = ""
    tokens: list[int] = field(default_factory=list)
    response: str = ""
    response_length: int = 0
    label: Any = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    rollout_log_probs: list[float] | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)
    remove_sample: bool = False
    generate_function_path: str | None = None
    train_metadata: dict[str, Any] | None = None
    weight_versions: list[str] = field(default_factory=list)
    # The oldest engine weight version among this sample's generation calls: staleness is bounded by it.
    weight_version: str | None = None
    teacher_log_probs: list[float] | None = None
    teacher_topk_log_probs: list[list[float]] | None = None
    teacher_topk_indices: list[list[int]] | None = None
    # The prompt's images, as the engine got them: `{"images": [base64 PNG/JPEG or data: URL, ...]}` in the order of
    # their pads in `tokens` (each pad already expanded to the image's token count, as /generate returns the ids).
    # The trainer preprocesses them the way the engine did; a few KB per screenshot keeps samples cheap to store.
    multimodal_inputs: dict[str, Any] | None = None
    # Already preprocessed images (`pixel_values` (patches, dim), `image_grid_thw` (images, 3)): used instead of
    # multimodal_inputs when a rollout sets them (upstream slime's field); large, so not the default path.
    multimodal_train_inputs: dict[str, Any] | None = None
    # Upstream OpenClaw-RL's further fields, so that its generate functions set them unchanged (the trainer reads
    # none of them): the trajectory a split sample belongs to, the session (routing affinity), seconds spent in
    # tools or environments, MoE routing replay, a per-sample reward function, the prefix-cache counters.
    rollout_id: int | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0
    rollout_routed_experts: Any = None
    custom_rm_path: str | None = None
    prefix_cache_info: PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    # ---------------------------------------------------------------------------------------------- access

    def get_reward_value(self, args: Any = None) -> float:
        """The scalar reward; a dict reward is indexed with `args.reward_key`."""
        if self.reward is None:
            raise ValueError(f"sample {self.index}: reward is None (the sample has not been scored)")
        if isinstance(self.reward, dict):
            key = getattr(args, "reward_key", None)
            if key is None:
                raise ValueError(
                    f"sample {self.index}: reward is a dict with keys {sorted(self.reward)}; "
                    "set --reward-key to choose the scalar to train on"
                )
            if key not in self.reward:
                raise ValueError(
                    f"sample {self.index}: reward_key {key!r} not in reward dict (keys: {sorted(self.reward)})"
                )
            return self.reward[key]
        return self.reward

    @property
    def effective_response_length(self) -> int:
        """Number of trained response tokens."""
        return int(sum(self.loss_mask)) if self.loss_mask is not None else self.response_length

    @property
    def prompt_length(self) -> int:
        return len(self.tokens) - self.response_length

    @property
    def response_tokens(self) -> list[int]:
        # Explicit start index: tokens[-0:] would be the whole list.
        return self.tokens[self.prompt_length :]

    # ------------------------------------------------------------------------------------------ invariants

    def validate(self) -> None:
        """Raise ValueError naming the first field whose shape breaks the sample's invariants."""
        n = self.response_length
        if n < 0:
            raise ValueError(f"response_length: must be >= 0, got {n}")
        if n > len(self.tokens):
            raise ValueError(f"response_length: {n} exceeds len(tokens)={len(self.tokens)}")
        if self.loss_mask is not None and len(self.loss_mask) != n:
            raise ValueError(f"loss_mask: length {len(self.loss_mask)} != response_length {n}")
        if self.rollout_log_probs is not None and len(self.rollout_log_probs) != n:
            raise ValueError(f"rollout_log_probs: length {len(self.rollout_log_probs)} != response_length {n}")
        if self.teacher_log_probs is not None and len(self.teacher_log_probs) != n:
            raise ValueError(f"teacher_log_probs: length {len(self.teacher_log_probs)} != response_length {n}")
        widths = {}
        for name in ("teacher_topk_log_probs", "teacher_topk_indices"):
            rows = getattr(self, name)
            if rows is None:
                continue
            if len(rows) != n:
                raise ValueError(f"{name}: length {len(rows)} != response_length {n}")
            row_widths = {len(row) for row in rows}
            if len(row_widths) > 1:
                raise ValueError(f"{name}: rows have different widths {sorted(row_widths)}")
            if row_widths:
                widths[name] = row_widths.pop()
        images = (self.multimodal_inputs or {}).get("images")
        if images is not None and not (isinstance(images, list) and all(isinstance(i, str) for i in images)):
            raise ValueError("multimodal_inputs['images']: must be a list of base64 strings or data: URLs")
        if len(set(widths.values())) > 1:
            raise ValueError(
                f"teacher_topk_indices: width {widths['teacher_topk_indices']} != "
                f"teacher_topk_log_probs width {widths['teacher_topk_log_probs']}"
            )

    # ---------------------------------------------------------------------------------------- engine info

    def update_from_meta_info(self, args_or_meta_info: Any, meta_info: dict[str, Any] | None = None) -> None:
        """Fold one SGLang generation's `meta_info` into the sample (status, weight version, prefix-cache counters).

        Called as `update_from_meta_info(meta_info)` or, as upstream's generate functions do,
        `update_from_meta_info(args, meta_info)`."""
        if meta_info is None:
            meta_info = args_or_meta_info
        self.prefix_cache_info.add(meta_info)
        finish = meta_info.get("finish_reason")
        if finish is not None:
            kind = finish.get("type") if isinstance(finish, dict) else finish
            if kind not in _FINISH_REASON_STATUS:
                raise ValueError(f"finish_reason: unknown type {kind!r}")
            self.status = Sample.Status(_FINISH_REASON_STATUS[kind])
            if kind == "abort" and isinstance(finish, dict) and finish.get("message"):
                # why the engine gave up (a weight update, or an engine error): the rollout reports it
                self.metadata["abort_reason"] = str(finish["message"])[:500]
        version = meta_info.get("weight_version")
        # An empty string is how an engine that does not track versions answers: treat it as absent.
        if version is not None and str(version) != "":
            version = str(version)
            self.weight_versions.append(version)
            self.weight_version = _oldest_version(self.weight_version, version)

    # ------------------------------------------------------------------------------------- serialisation

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: declared fields first, then any extra instance attributes."""
        out = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}
        for name, value in self.__dict__.items():
            if name not in out:
                out[name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sample:
        names = {f.name for f in dataclasses.fields(cls)}
        known = {k: v for k, v in data.items() if k in names}
        if "status" in known:
            known["status"] = cls.Status(known["status"])
        if isinstance(known.get("prefix_cache_info"), dict):
            known["prefix_cache_info"] = PrefixCacheInfo(**known["prefix_cache_info"])
        sample = cls(**known)
        for name, value in data.items():
            if name not in names:
                setattr(sample, name, value)
        return sample

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Sample:
        return cls.from_dict(json.loads(text))


@dataclass
class RolloutFnTrainOutput:
    """A training rollout: one inner list per prompt group."""

    samples: list[list[Sample]]
    metrics: dict[str, Any] | None = None


@dataclass
class RolloutFnEvalOutput:
    """An evaluation rollout: results keyed by eval dataset name."""

    data: dict[str, dict[str, Any]]
    metrics: dict[str, Any] | None = None


def flatten_samples(items) -> list[Sample]:
    """The samples of a rollout's nested lists (groups of samples, or of a multi-step agent's episodes, each a list
    of its step samples), in order."""
    out: list[Sample] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(flatten_samples(item))
        else:
            out.append(item)
    return out


@dataclass
class DynamicFilterOutput:
    keep: bool
    reason: str | None = None
