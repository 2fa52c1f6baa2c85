"""The PRM evaluation prompt: does this assistant step serve the user, judged from what came next?

Same decision rules as the upstream PRM judge, in our own words. The judge sees EVERY next-state message
(parallel tool results, a tool result followed by the user's reply), each under its own role header, and
it sees the user's last request, so that "the user repeated the request" and "the tool output answers the
request" can be judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from slime.conversation.judges.voting import render_message_for_judge, truncate_middle
from slime.conversation.openclaw_conventions import clean_user_text, is_internal_context, message_text

__all__ = ["PRM_SYSTEM_PROMPT", "build_prm_messages", "last_user_request", "render_next_state", "user_requests_text"]

PRM_SYSTEM_PROMPT = """\
You are a process reward model. You grade a single step of a conversation between a user and an AI \
assistant. You are given what the assistant produced at this step and the next state, meaning whatever \
came right after it. Decide whether the assistant's output accomplished what the user wanted at this \
step, and use the next state as your evidence.

How to read the next state:
- [role: user] is the user's reply to the assistant's output.
- [role: tool] is the value returned by a tool that the assistant called in its output. That value did \
not exist before the call; it exists because of the assistant's action. A normal result without an \
error means the action worked, and the step deserves a positive score.

Scores:
- \\boxed{1} (good): the user moves on to something else, thanks the assistant or is satisfied, the \
environment confirms success, or a tool returns a result without an error.
- \\boxed{-1} (bad): the user asks for the step to be done again or retried; the user corrects the output \
or asks for it to be changed (for example "make it X instead", "no, I meant ...", "not that one", \
"please fix ..."); the user repeats or rewords the same request, which shows it was not met; or the \
environment reports an error or failure that the action caused.
- \\boxed{0} (neutral): the evidence is ambiguous, the follow-up has nothing to do with this step, or \
there is not enough information to decide.

A request to change or fix the output is negative feedback, not a neutral new instruction.

Think it through step by step, then give your final score inside \\boxed{}."""

CLASSIFY_INSTRUCTION = (
    "First decide which case the next state shows: (a) positive progress, (b) a correction, redo or "
    "change request, or (c) ambiguous. Then give your score as \\boxed{1}, \\boxed{-1} or \\boxed{0}."
)


def last_user_request(prompt_messages: Sequence[dict]) -> str:
    """Text of the last real user message the model answered (OpenClaw's internal context skipped)."""
    for message in reversed(prompt_messages):
        if message.get("role") == "user" and not is_internal_context(message):
            return clean_user_text(message_text(message))
    return ""


def user_requests_text(prompt_messages: Sequence[dict]) -> str:
    """Every real user message of a prompt, joined: what a reply to it is about (the original request and any
    follow-up such as a correction)."""
    return "\n".join(clean_user_text(message_text(m)) for m in prompt_messages
                     if m.get("role") == "user" and not is_internal_context(m))


def render_next_state(next_state: Sequence[dict], state_chars: int | None = None) -> str:
    """Every next-state message under its own `## Next state [role: ...]` header."""
    sections = []
    for message in next_state:
        if is_internal_context(message):
            continue  # client scratch state, not a reaction to the step
        role = message.get("role") or "user"  # upstream's default for a message without a role
        text = render_message_for_judge(message)
        if role == "user":
            text = clean_user_text(text)
        sections.append(f"## Next state [role: {role}]\n{truncate_middle(text, state_chars) or '(empty)'}")
    if not sections:
        sections.append("## Next state [role: user]\n(empty)")
    return "\n\n".join(sections)


def build_prm_messages(
    response_message: dict,
    next_state: Sequence[dict],
    prompt_messages: Sequence[dict] = (),
    *,
    request_chars: int | None = 4000,
    response_chars: int | None = 8000,
    state_chars: int | None = 4000,
) -> list[dict]:
    """The `[system, user]` messages asking a judge model to score one step."""
    return judge_messages(PRM_SYSTEM_PROMPT, "Assistant output", CLASSIFY_INSTRUCTION, response_message, next_state,
                          prompt_messages, request_chars=request_chars, response_chars=response_chars,
                          state_chars=state_chars)


def judge_messages(system_prompt: str, response_heading: str, instruction: str, response_message: dict,
                   next_state: Sequence[dict], prompt_messages: Sequence[dict] = (), *,
                   request_chars: int | None = 4000, response_chars: int | None = 8000,
                   state_chars: int | None = 4000) -> list[dict]:
    """`[system, user]`: the user's last request, the assistant's step, every next-state message, the task."""
    parts = []
    request = last_user_request(prompt_messages)
    if request:
        parts.append(f"## User request\n{truncate_middle(request, request_chars)}")
    response = render_message_for_judge(response_message)
    parts.append(f"## {response_heading}\n{truncate_middle(response, response_chars) or '(empty)'}")
    parts.append(render_next_state(next_state, state_chars))
    parts.append(instruction)
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
