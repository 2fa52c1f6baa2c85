"""Next-state judges: score one assistant turn from what followed it (every vote has a deadline; the judge
sees every next-state message and the user's request), and hint judges: extract a hindsight hint from it
for on-policy distillation.

`build_judge(kind, **options)` makes one from configuration; every judge speaks the `Judge` protocol
of `base`; `build_hint_judge(kind, **options)` makes a hint judge (the `HintJudge` protocol of
`hints`). Importing this package is light: sentence-transformers loads only when an embedding judge
first scores a reply.
"""

from slime.conversation.judges.base import Judge, Judgement, TurnForJudge, Vote
from slime.conversation.judges.cascade import CascadeJudge
from slime.conversation.judges.embedding import EmbeddingJudge
from slime.conversation.judges.hint_llm import LLMHintJudge
from slime.conversation.judges.hint_prompts import HINT_SYSTEM_PROMPT, build_hint_messages
from slime.conversation.judges.hint_rules import RulesHintJudge, rules_hint, user_feedback_hint
from slime.conversation.judges.hints import (
    CascadeHintJudge,
    HintJudge,
    HintResult,
    choose,
    hint_candidates,
    parse_hint,
    parse_hint_score,
    select_longest,
)
from slime.conversation.judges.llm import LLMJudge
from slime.conversation.judges.prompts import PRM_SYSTEM_PROMPT, build_prm_messages, last_user_request
from slime.conversation.judges.registry import BUILTIN_KINDS, HINT_KINDS, build_hint_judge, build_judge
from slime.conversation.judges.rules import RulesJudge, classify_tool_result, classify_user_text, rules_verdict
from slime.conversation.judges.voting import majority_vote, parse_boxed_score, render_message_for_judge
from slime.conversation.openclaw_conventions import clean_user_text, is_internal_context, message_text

__all__ = [
    "BUILTIN_KINDS",
    "CascadeHintJudge",
    "CascadeJudge",
    "EmbeddingJudge",
    "HINT_KINDS",
    "HINT_SYSTEM_PROMPT",
    "HintJudge",
    "HintResult",
    "Judge",
    "Judgement",
    "LLMHintJudge",
    "LLMJudge",
    "PRM_SYSTEM_PROMPT",
    "RulesHintJudge",
    "RulesJudge",
    "TurnForJudge",
    "Vote",
    "build_hint_judge",
    "build_hint_messages",
    "build_judge",
    "build_prm_messages",
    "choose",
    "classify_tool_result",
    "classify_user_text",
    "clean_user_text",
    "hint_candidates",
    "is_internal_context",
    "last_user_request",
    "majority_vote",
    "message_text",
    "parse_boxed_score",
    "parse_hint",
    "parse_hint_score",
    "render_message_for_judge",
    "rules_hint",
    "rules_verdict",
    "select_longest",
    "user_feedback_hint",
]

