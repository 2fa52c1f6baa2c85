"""Prompt data sources for the rollout side (`--data-source-path`, default `RolloutDataSourceWithBuffer`).

A data source hands out *groups*: lists of `n_samples_per_prompt` deep copies of one prompt `Sample`,
all sharing a fresh `group_index`, each with a fresh, globally unique `index`. Prompts come from the
`--prompt-data` JSONL file, are chat-templated at load time with `--apply-chat-template`, lose the ones
longer than `--rollout-max-prompt-len` tokens, and are served in file order or, with `--rollout-shuffle`,
in a per-epoch permutation seeded with `rollout_seed + epoch`. Reading wraps around epochs.

Groups given back with `add_samples` (e.g. partially generated ones) go to a buffer that is served first.

The whole reading position (epoch, offset in the epoch, counters, buffer) is a small JSON document:
`state_dict()` / `load_state_dict()` in memory and `save()` / `load()` on disk. The per-epoch order is
a pure function of the seed and the epoch, so a resumed run hands out exactly the batch the original run
would have handed out next.
"""

from __future__ import annotations

import abc
import copy
import functools
import json
import logging
import os
import random
import re
from pathlib import Path
from typing import Any

from slime.utils.types import Sample

__all__ = [
    "PromptDataset",
    "RolloutDataSource",
    "RolloutDataSourceWithBuffer",
    "load_prompt_samples",
    "load_tokenizer",
    "render_prompt",
]

log = logging.getLogger(__name__)

STATE_VERSION = 1
_SLICE = re.compile(r"^(?P<path>.+)@\[(?P<start>-?\d*):(?P<end>-?\d*)\]$")


@functools.lru_cache(maxsize=8)
def _load_tokenizer_cached(model: str):
    from transformers import AutoTokenizer

    from slime.models import resolve_model_path

    return AutoTokenizer.from_pretrained(str(resolve_model_path(model)))


def load_tokenizer(model: str | os.PathLike):
    """The tokenizer of `--hf-checkpoint` (a model folder or a built-in name), loaded once per process."""
    if model is None:
        raise ValueError("a tokenizer is needed (chat template / prompt-length filter) but --hf-checkpoint is not set")
    return _load_tokenizer_cached(str(model))


def as_messages(prompt: Any) -> list[dict]:
    """A prompt as chat messages: a string is one user message."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and all(isinstance(m, dict) for m in prompt):
        return prompt
    raise ValueError(f"a prompt must be a string or a list of chat messages, got {type(prompt).__name__}")


def render_prompt(tokenizer, prompt: Any, tools: list | None = None, chat_template_kwargs: dict | None = None) -> str:
    """Chat-template a prompt (messages, or a string taken as one user message) for generation."""
    kwargs = dict(chat_template_kwargs or {})
    if tools:
        kwargs["tools"] = tools
    return tokenizer.apply_chat_template(as_messages(prompt), tokenize=False, add_generation_prompt=True, **kwargs)


def _prompt_length(tokenizer, prompt: Any) -> int:
    text = prompt if isinstance(prompt, str) else render_prompt(tokenizer, prompt)
    return len(tokenizer.encode(text, add_special_tokens=False))


def _read_rows(spec: str) -> list[dict]:
    """Rows of a JSONL file; `path@[start:end]` keeps a Python-style slice of them."""
    start = end = None
    match = _SLICE.match(str(spec))
    path = Path(match["path"] if match else spec)
    if match:
        start = int(match["start"]) if match["start"] else None
        end = int(match["end"]) if match["end"] else None
    if not path.exists():
        raise FileNotFoundError(f"--prompt-data {path} does not exist")
    if path.suffix == ".parquet":
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - depends on the environment
            raise ValueError(f"{path}: reading parquet needs pandas; convert it to JSONL") from None
        rows = pd.read_parquet(path).to_dict(orient="records")
    else:
        rows = [row for _, row in iter_jsonl_objects(path)]
    return rows[start:end]


def iter_jsonl_objects(path):
    """(line number, object) for each non-blank line of a JSONL file; a ValueError names `path:line` for a line
    that is not JSON or not an object."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not valid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            yield lineno, row


def load_prompt_samples(
    path: str,
    *,
    input_key: str = "prompt",
    label_key: str | None = "label",
    metadata_key: str | None = "metadata",
    tool_key: str | None = None,
    tokenizer=None,
    apply_chat_template: bool = False,
    chat_template_kwargs: dict | None = None,
    max_prompt_len: int | None = None,
) -> tuple[list[Sample], int]:
    """Load prompt Samples from a JSONL file. Returns (samples, number filtered out as too long).

    `prompt` is the chat-templated text when `apply_chat_template` is set, else the raw column value
    (a string, or a list of messages that the default generate function templates at request time).
    """
    if (apply_chat_template or max_prompt_len is not None) and tokenizer is None:
        raise ValueError("load_prompt_samples needs a tokenizer for the chat template / prompt-length filter")
    samples, too_long = [], 0
    for i, row in enumerate(_read_rows(path)):
        if input_key not in row:
            raise KeyError(f"{path}: row {i} has no input key {input_key!r} (keys: {sorted(row)})")
        prompt = row[input_key]
        if apply_chat_template:
            tools = row.get(tool_key) if tool_key else None
            if isinstance(tools, str):
                tools = json.loads(tools)
            prompt = render_prompt(tokenizer, prompt, tools, chat_template_kwargs)
        # an object prompt (a terminal task, an SWE instance) is no text: its custom generate function renders the
        # model's prompt itself, so no length can be checked here
        if max_prompt_len is not None and not isinstance(prompt, dict) and \
                _prompt_length(tokenizer, prompt) > max_prompt_len:
            too_long += 1
            continue
        metadata = row.get(metadata_key) if metadata_key else None
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        if metadata is not None and not isinstance(metadata, dict):
            raise ValueError(f"{path}: row {i}: metadata {metadata_key!r} must be an object")
        samples.append(
            Sample(prompt=prompt, label=row.get(label_key) if label_key else None, metadata=dict(metadata or {}))
        )
    return samples, too_long


class PromptDataset:
    """The loaded prompts (`samples`), in file order; `len()` and indexing work as on a list."""

    def __init__(self, samples: list[Sample], path: str | None = None, num_filtered: int = 0):
        self.samples = samples
        self.path = path
        self.num_filtered = num_filtered

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> Sample:
        return self.samples[i]

    def order(self, epoch: int, shuffle: bool, seed: int) -> list[int]:
        """The order prompts are served in during `epoch` (a pure function of its arguments)."""
        order = list(range(len(self.samples)))
        if shuffle:
            random.Random(seed + epoch).shuffle(order)
        return order


def _max_prompt_len(args) -> int | None:
    value = getattr(args, "rollout_max_prompt_len", None)
    if value is None and getattr(args, "rollout_max_context_len", None) is not None:
        value = args.rollout_max_context_len - 1
    return value


class DataSource(abc.ABC):
    """Upstream's data-source interface (`--data-source-path cls(args)`): hand out prompt groups, take unfinished
    ones back, save and load the position by rollout id. The trainer checkpoints a data source through
    `state_dict()` / `load_state_dict()` when it has them (kept in the checkpoint folder, consistent under async
    prefetch); one with only `save(rollout_id)` / `load(rollout_id)` is saved at each checkpoint and loaded with the
    checkpoint's rollout id on resume, as upstream does."""

    @abc.abstractmethod
    def get_samples(self, num_samples: int) -> list[list[Sample]]:
        """`num_samples` groups of `--n-samples-per-prompt` samples each."""

    @abc.abstractmethod
    def add_samples(self, samples: list[list[Sample]]) -> None:
        """Groups given back (a partial rollout's unfinished ones): served again first."""

    @abc.abstractmethod
    def save(self, rollout_id) -> Any:
        """Persist the position reached after `rollout_id`."""

    @abc.abstractmethod
    def load(self, rollout_id=None) -> Any:
        """Restore the position saved after `rollout_id`."""


class RolloutDataSource(DataSource):
    """Groups of prompt Samples from `--prompt-data`, with a buffer of given-back groups served first.

    Without a global dataset (`--disable-rollout-global-dataset` or no `--prompt-data`) it hands out
    groups of empty Samples (with indices), to be filled by a custom generate function.
    """

    def __init__(self, args, tokenizer=None):
        self.args = args
        self.n_samples_per_prompt = int(getattr(args, "n_samples_per_prompt", 1) or 1)
        self.shuffle = bool(getattr(args, "rollout_shuffle", False))
        self.seed = int(getattr(args, "rollout_seed", 42) or 0)
        self.epoch_id = 0
        self.sample_offset = 0  # position inside the current epoch's order
        self.sample_group_index = 0  # next group_index
        self.sample_index = 0  # next sample index
        self.buffer: list[list[Sample]] = []
        self._order: list[int] | None = None
        self.dataset: PromptDataset | None = None

        path = getattr(args, "prompt_data", None)
        if getattr(args, "rollout_global_dataset", True) and path:
            max_len = _max_prompt_len(args)
            apply_template = bool(getattr(args, "apply_chat_template", False))
            if tokenizer is None and (apply_template or max_len is not None):
                tokenizer = load_tokenizer(getattr(args, "hf_checkpoint", None))
            samples, too_long = load_prompt_samples(
                path,
                input_key=getattr(args, "input_key", None) or "prompt",
                label_key=getattr(args, "label_key", None),
                metadata_key=getattr(args, "metadata_key", None),
                tool_key=getattr(args, "tool_key", None),
                tokenizer=tokenizer,
                apply_chat_template=apply_template,
                chat_template_kwargs=getattr(args, "apply_chat_template_kwargs", None),
                max_prompt_len=max_len,
            )
            if too_long:
                log.warning("%s: filtered out %d of %d prompts longer than %d tokens (--rollout-max-prompt-len)",
                            path, too_long, too_long + len(samples), max_len)
            if not samples:
                raise ValueError(f"--prompt-data {path} holds no usable prompts ({too_long} filtered as too long)")
            self.dataset = PromptDataset(samples, str(path), too_long)
            log.info("loaded %d prompts from %s", len(samples), path)

    # ------------------------------------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self.dataset) if self.dataset is not None else 0

    def _epoch_order(self) -> list[int]:
        if self._order is None:
            self._order = self.dataset.order(self.epoch_id, self.shuffle, self.seed)
        return self._order

    def _next_prompt(self) -> Sample:
        if self.dataset is None:
            return Sample()
        if self.sample_offset >= len(self.dataset):
            self.epoch_id += 1
            self.sample_offset = 0
            self._order = None
        prompt = self.dataset[self._epoch_order()[self.sample_offset]]
        self.sample_offset += 1
        return prompt

    def _new_group(self) -> list[Sample]:
        prompt = self._next_prompt()
        group = []
        for _ in range(self.n_samples_per_prompt):
            sample = copy.deepcopy(prompt)
            sample.group_index = self.sample_group_index
            sample.index = self.sample_index
            self.sample_index += 1
            group.append(sample)
        self.sample_group_index += 1
        return group

    def _take_from_buffer(self, n: int) -> list[list[Sample]]:
        if not self.buffer or n <= 0:
            return []
        hooks = getattr(self.args, "hooks", None) or {}
        buffer_filter = hooks.get("buffer_filter_path") or hooks.get("--buffer-filter-path")
        if buffer_filter is not None:
            return list(buffer_filter(self.args, None, self.buffer, n))
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def get_samples(self, num_groups: int) -> list[list[Sample]]:
        """`num_groups` groups: buffered ones first, then fresh ones (wrapping around epochs)."""
        groups = self._take_from_buffer(num_groups)
        while len(groups) < num_groups:
            groups.append(self._new_group())
        return groups

    def add_samples(self, groups: list[list[Sample]]) -> None:
        """Give groups back (e.g. unfinished partial rollouts); they are served before fresh prompts."""
        for group in groups:
            if not isinstance(group, list) or len(group) != self.n_samples_per_prompt:
                size = len(group) if isinstance(group, list) else type(group).__name__
                raise ValueError(f"add_samples: every group must hold n_samples_per_prompt="
                                 f"{self.n_samples_per_prompt} samples, got {size}")
            self.buffer.append(group)

    def get_buffer_length(self) -> int:
        return len(self.buffer)

    # --------------------------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "epoch_id": self.epoch_id,
            "sample_offset": self.sample_offset,
            "sample_group_index": self.sample_group_index,
            "sample_index": self.sample_index,
            "dataset_size": len(self),
            "shuffle": self.shuffle,
            "seed": self.seed,
            "buffer": [[sample.to_dict() for sample in group] for group in self.buffer],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("version", STATE_VERSION) != STATE_VERSION:
            raise ValueError(f"data source state version {state.get('version')} != {STATE_VERSION}")
        if state.get("dataset_size", len(self)) != len(self):
            log.warning("data source state was saved for %s prompts but %d are loaded now; "
                        "the resumed order will differ", state.get("dataset_size"), len(self))
        for name in ("shuffle", "seed"):
            if name in state and state[name] != getattr(self, name):
                log.warning("data source state was saved with %s=%r, now %r", name, state[name], getattr(self, name))
        self.epoch_id = int(state["epoch_id"])
        self.sample_offset = int(state["sample_offset"])
        self.sample_group_index = int(state["sample_group_index"])
        self.sample_index = int(state["sample_index"])
        self.buffer = [[Sample.from_dict(d) for d in group] for group in state.get("buffer", [])]
        self._order = None

    def _state_path(self, where: str | os.PathLike | int, directory: str | None) -> Path:
        if isinstance(where, int) and not isinstance(where, bool):
            if not directory:
                raise ValueError("saving/loading the data source by rollout id needs --save/--load")
            return Path(directory) / "rollout" / f"global_dataset_state_dict_{where}.json"
        return Path(where)

    def save(self, where: str | os.PathLike | int) -> Path:
        """Write the state as JSON to a path, or for a rollout id to `{--save}/rollout/...{id}.json`."""
        path = self._state_path(where, getattr(self.args, "save", None))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.state_dict(), ensure_ascii=False))
        os.replace(tmp, path)
        return path

    def load(self, where: str | os.PathLike | int | None = None) -> bool:
        """Restore the state from a path, or for a rollout id from `{--load}/rollout/...{id}.json`.

        `None` means the rollout before `--start-rollout-id` when `--load` is set. Returns whether a
        state was found; a missing file leaves the source at the beginning (fresh run).
        """
        if where is None:
            start = getattr(self.args, "start_rollout_id", None)
            if not getattr(self.args, "load", None) or not start:
                return False
            where = int(start) - 1
        path = self._state_path(where, getattr(self.args, "load", None))
        if not path.exists():
            log.info("no data source state at %s; starting from the beginning", path)
            return False
        self.load_state_dict(json.loads(path.read_text()))
        log.info("data source resumed from %s (epoch %d, offset %d)", path, self.epoch_id, self.sample_offset)
        return True


class RolloutDataSourceWithBuffer(RolloutDataSource):
    """slime's default `--data-source-path`; the buffer already lives in `RolloutDataSource`."""
