"""SWE RL on real code (issue 21, first part): SWE-bench instances made offline from pinned PyPI projects
(:mod:`.generate`), the repository store that rebuilds them byte for byte (:mod:`.repos`), and the sealed evaluation
of a patch (:mod:`.evaluate`). The shipped instances live in ``swe-rl/data/instances.jsonl``."""
