"""OSWorld's evaluators: the getters (what the desktop's state is) and the metrics (how it compares), each a
registry by name as OSWorld's ``desktop_env/evaluators``."""

from .chrome import CHROME_GETTERS
from .getters import GETTERS, EvalEnv, EvaluationError
from .metrics import METRICS, unsupported_options
from .relative_time import get_rule_relativeTime

GETTERS.update(CHROME_GETTERS)  # the Chrome getters live with the Chrome metrics (chrome.py), as OSWorld's module
GETTERS["rule_relativeTime"] = get_rule_relativeTime  # expected dates relative to today (relative_time.py)

__all__ = ["GETTERS", "METRICS", "EvalEnv", "EvaluationError", "unsupported_options"]
