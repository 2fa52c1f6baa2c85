"""What the two conversation data sources (a store, a rollout directory) share: their checkpointed state is only
which batch comes next (the samples' own state lives in the store or the directory's ledger), and samples come
back from JSON the same way."""

from __future__ import annotations

import json
from pathlib import Path

from slime.utils.types import Sample


class NextBatchState:
    """`state_dict` / `save` / `load` of a data source whose only state is `next_batch`. Subclasses name their
    file (`STATE_NAME`) and may add fields to `state_dict` for the reader's benefit."""

    STATE_NAME = "data_source_state"
    next_batch: int = 0

    def state_dict(self) -> dict:
        return {"next_batch": self.next_batch}

    def load_state_dict(self, state: dict) -> None:
        self.next_batch = int(state.get("next_batch", 0))

    def _state_path(self, where, base) -> Path:
        return Path(where) if not isinstance(where, int) else \
            Path(base or self.args.run_dir) / "rollout" / f"{self.STATE_NAME}_{where}.json"

    def save(self, where) -> Path:
        path = self._state_path(where, self.args.save)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.state_dict()))
        return path

    def load(self, where=None) -> bool:
        if where is None:
            return False
        path = self._state_path(where, self.args.load)
        if not path.is_file():
            return False
        self.load_state_dict(json.loads(path.read_text()))
        return True


def sample_from_dict(data: dict) -> Sample:
    data = dict(data)
    data.pop("sample_id", None)  # the store's row id, not a Sample field
    return Sample.from_dict(data)
