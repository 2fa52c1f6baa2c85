"""The hint-judge prompt: does what came next reveal something that would have improved the response?

Same semantics as the upstream hindsight-hint prompt, in our own words. Like the PRM prompt, it shows the
judge the user's last request and EVERY next-state message, each under its own role header (parallel tool
results, a tool result followed by the user's reply).
"""

from __future__ import annotations

from collections.abc import Sequence

from slime.conversation.judges.prompts import judge_messages

__all__ = ["HINT_INSTRUCTION", "HINT_SYSTEM_PROMPT", "build_hint_messages"]

HINT_SYSTEM_PROMPT = """\
You extract hindsight hints for training an AI assistant. You are given the user's request, the \
assistant's response at one step of a conversation, and the next state: whatever came right after that \
response. Your job is to decide whether the next state reveals information that, had the assistant known \
it in advance, would have let it write a better response.

How to read the next state:
- [role: user] is the user's reply to the response. Corrections, complaints, clarifications ("no, I meant \
...", "too long", "don't use X", "you should have checked Y first") are hindsight information.
- [role: tool] is the value returned by a tool that the assistant called in its response. It did not exist \
before the call; it exists because of the assistant's action. A tool result without an error usually means \
the action was right, and it is NOT something the assistant should have known beforehand. An error or \
failure caused by the action is hindsight information.

Output rules (follow them exactly):
- Give exactly one final decision: \\boxed{1} if the next state contains useful hindsight information, \
\\boxed{-1} if it does not.
- If and only if your decision is \\boxed{1}, write a hint of one to three sentences between [HINT_START] \
and [HINT_END]. Address it to the assistant as an instruction. Make it concrete, actionable and dense \
with information: say what to do differently, not that something went wrong.
- If your decision is \\boxed{-1}, write no hint block."""

HINT_INSTRUCTION = "Now give your decision and, only if it is positive, the hint, in the required format."


def build_hint_messages(
    response_message: dict,
    next_state: Sequence[dict],
    prompt_messages: Sequence[dict] = (),
    *,
    request_chars: int | None = 4000,
    response_chars: int | None = 8000,
    state_chars: int | None = 4000,
) -> list[dict]:
    """The `[system, user]` messages asking a judge model for a hindsight hint on one step."""
    return judge_messages(HINT_SYSTEM_PROMPT, "Assistant response", HINT_INSTRUCTION, response_message, next_state,
                          prompt_messages, request_chars=request_chars, response_chars=response_chars,
                          state_chars=state_chars)
