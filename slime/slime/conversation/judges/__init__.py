"""Next-state judges: score one assistant turn from what followed it (spec 5.1-5.3, with B7/B20 fixed).

`build_judge(kind, **options)` makes one from configuration; every judge speaks the `Judge` protocol
of `base`. Importing this package is light: sentence-transformers loads only when an embedding judge
first scores a reply.
"""

from slime.conversation.judges.base import Judge, Judgement, TurnForJudge, Vote
from slime.conversation.judges.cascade import CascadeJudge
from slime.conversation.judges.embedding import EmbeddingJudge
from slime.conversation.judges.llm import LLMJudge
from slime.conversation.judges.prompts import PRM_SYSTEM_PROMPT, build_prm_messages, last_user_request
from slime.conversation.judges.registry import BUILTIN_KINDS, build_judge
from slime.conversation.judges.rules import RulesJudge, classify_tool_result, classify_user_text, rules_verdict
from slime.conversation.judges.voting import (
    clean_user_text,
    is_internal_context,
    majority_vote,
    message_text,
    parse_boxed_score,
    render_message_for_judge,
)

__all__ = [
    "BUILTIN_KINDS",
    "CascadeJudge",
    "EmbeddingJudge",
    "Judge",
    "Judgement",
    "LLMJudge",
    "PRM_SYSTEM_PROMPT",
    "RulesJudge",
    "TurnForJudge",
    "Vote",
    "build_judge",
    "build_prm_messages",
    "classify_tool_result",
    "classify_user_text",
    "clean_user_text",
    "is_internal_context",
    "last_user_request",
    "majority_vote",
    "message_text",
    "parse_boxed_score",
    "render_message_for_judge",
    "rules_verdict",
]

