"""A data source in upstream's shape for the port test: `DataSource` with `save(rollout_id)` / `load(rollout_id)`
and no state dict; it writes its position under --save and reads it from --load, as upstream's do. Every group it
hands out and every load is recorded in $UPSTREAM_SOURCE_LOG."""

import json
import os
from pathlib import Path

from slime.rollout.data_source import DataSource, RolloutDataSource


class PromptsInOrder(DataSource):
    def __init__(self, args):
        self.args = args
        self._prompts = RolloutDataSource(args)  # the reading of --prompt-data (its own state is not exposed)

    def _log(self, record):
        with open(os.environ["UPSTREAM_SOURCE_LOG"], "a") as out:
            out.write(json.dumps(record) + "\n")

    def get_samples(self, num_samples):
        groups = self._prompts.get_samples(num_samples)
        self._log({"served": [group[0].group_index for group in groups]})
        return groups

    def add_samples(self, samples):
        self._prompts.add_samples(samples)

    def save(self, rollout_id):
        folder = Path(self.args.save) / "rollout"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"prompts_in_order_{rollout_id}.json").write_text(json.dumps(self._prompts.state_dict()))

    def load(self, rollout_id=None):
        state = json.loads((Path(self.args.load) / "rollout" / f"prompts_in_order_{rollout_id}.json").read_text())
        self._prompts.load_state_dict(state)
        self._log({"loaded": rollout_id})
