"""The SWE agent without a sandbox: the bash-block parser, the submit sentinel, the observation template with its
elision and reminders, the head/tail context manager, and the training samples of both modes (exact ids and
log-probs, loss masks) built from an episode against an in-memory environment and a scripted engine; the PRM scores
stay aligned with the steps after a format error."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import swe_templates as templates
from generate_with_swe_remote import (
    AgentSettings,
    SweEnginePolicy,
    bash_response,
    instance_id_of,
    is_submit,
    manage_context,
    parse_bash_block,
    reward_func,
    run_episode,
    step_samples,
    submitted_patch,
    is_test_run,
    trajectory_sample,
)
from swe_prm import StepJudging, SweRuleJudge, judge_messages, names_in
from slime.utils.types import Sample

PATCH = ("diff --git a/pkg/mod.py b/pkg/mod.py\nindex 1..2 100644\n--- a/pkg/mod.py\n+++ b/pkg/mod.py\n"
         "@@ -1 +1 @@\n-x = 1\n+x = 2\n")


# ------------------------------------------------------------------------------------------------ parsing


def test_the_first_bash_block_is_the_command():
    assert parse_bash_block("THOUGHT: look\n\n```bash\nls -la\n```") == "ls -la"
    assert parse_bash_block("```bash\necho a\necho b\n```\nthen\n```bash\nrm -rf x\n```") == "echo a\necho b"
    assert parse_bash_block("```bash  \r\ncat f\r\n```") == "cat f\r"  # CRLF: the body as written
    assert parse_bash_block("```python\nprint(1)\n```") is None
    assert parse_bash_block("```sh\nls\n```\n```\nls\n```") is None
    assert parse_bash_block("```python\nprint(1)\n```\n```bash\npwd\n```") == "pwd"  # the first *bash* block
    assert parse_bash_block("no block at all") is None and parse_bash_block("") is None
    assert parse_bash_block("```bash\n\n```") is None  # an empty block runs nothing: a format error
    assert parse_bash_block("```bash\nls") is None  # not closed (cut by the token limit)


def test_the_submit_sentinel_and_its_patch():
    assert is_submit(templates.SUBMIT_COMMAND) and not is_submit("git diff")
    out = f"{templates.SUBMIT_SENTINEL}\n{PATCH}"
    assert submitted_patch(out) == PATCH
    assert submitted_patch(f"noise\n{templates.SUBMIT_SENTINEL}\r\n{PATCH}") == PATCH
    assert submitted_patch(f"{templates.SUBMIT_SENTINEL}\n") is None  # nothing changed: not a patch
    assert submitted_patch(f"{templates.SUBMIT_SENTINEL}\nfatal: not a git repository") is None
    assert submitted_patch(PATCH) is None  # no sentinel


def test_observations_elide_long_outputs_and_remind_of_the_turns_left():
    short = templates.observation(0, "hello\n", 5)
    assert short == ("<returncode>0</returncode>\n<output>\nhello\n</output>\n"
                     "REMINDER: You have 5 turns left to complete the task.")
    assert templates.observation(2, "x", 1).endswith("REMINDER: You only have 1 turn left. Submit your changes now "
                                                      "with the submit command.")
    just_under = "a" * 9_999
    assert f"<output>\n{just_under}</output>" in templates.format_output(0, just_under)
    long = "H" * 5_000 + "M" * 2_345 + "T" * 5_000
    text = templates.format_output(1, long)
    assert "<output>" not in text and "M" not in text.replace("MIDDLE", "")
    head = text.split("<output_head>\n", 1)[1].split("\n</output_head>", 1)[0]
    tail = text.split("<output_tail>\n", 1)[1].split("\n</output_tail>", 1)[0]
    assert head == "H" * 5_000 and tail == "T" * 5_000
    assert "<elided_chars>\n2345 characters elided\n</elided_chars>" in text
    assert text.startswith("<returncode>1</returncode>\n<warning>")


def test_the_format_error_keeps_upstreams_shape():
    assert templates.FORMAT_ERROR.startswith("<returncode>-1</returncode><output>")
    assert templates.FORMAT_ERROR.endswith("</output>") and "```bash" in templates.FORMAT_ERROR
    system = templates.SYSTEM_TEMPLATE
    assert "THOUGHT" in system and "exactly ONE bash code block" in system and "```bash\nls -la\n```" in system
    user = templates.instance_message("It breaks.")["content"]
    assert "<issue>\nIt breaks.\n</issue>" in user and templates.SUBMIT_COMMAND in user
    assert templates.SUBMIT_COMMAND == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"


def test_tests_ran_is_what_the_host_ran_and_its_status_never_the_printed_summary():
    assert is_test_run("python -m pytest -q tests", 1)  # some failed
    assert is_test_run("pytest tests/x.py", 0)
    assert is_test_run("cd /testbed && PYTHONPATH=src python3 -m pytest -x", 0)
    assert is_test_run("timeout 60 tox -e py", 0) and is_test_run("python -m unittest", 0)
    assert is_test_run("git diff | cat; pytest -q", 1)
    assert not is_test_run("python -m pytest tests", 2)  # interrupted / collection errors: not a test run's status
    assert not is_test_run("pytest --bad-flag", 4)
    assert not is_test_run("cat pytest.ini", 0)
    assert not is_test_run("echo '1 passed in 0.1s' # pytest", 0)  # printed, not run
    assert not is_test_run("echo 5 passed in 0.1s", 0)


# ------------------------------------------------------------------------------------------------ context


def _conversation(n_turns: int, size: int = 10) -> list[dict]:
    messages = [{"role": "system", "content": "S" * 20}, {"role": "user", "content": "P" * 20}]
    for k in range(n_turns):
        messages += [{"role": "assistant", "content": f"a{k}:" + "x" * size},
                     {"role": "user", "content": f"o{k}:" + "y" * size}]
    return messages


def _chars(messages):
    return sum(len(m["content"]) for m in messages)


def test_the_context_manager_keeps_the_head_and_tail_turns_with_a_note():
    messages = _conversation(10)  # 40 + 10 turns x 28 chars = 320
    assert manage_context(messages, _chars, 1000).messages == messages  # fits: unchanged
    cut = manage_context(messages, _chars, 200)
    fixed = 40 + len(templates.omitted_note(10)["content"])
    available = 200 - fixed
    head_turns = (int(0.3 * available)) // 28
    assert cut.messages[:2] == messages[:2]
    kept = [m["content"] for m in cut.messages[2:] if m["role"] == "assistant"]
    assert kept[:head_turns] == [f"a{k}:" + "x" * 10 for k in range(head_turns)]
    assert kept[-1].startswith("a9:") and cut.messages[-1]["content"].startswith("o9:")  # the latest turn stays
    note = cut.messages[2 + 2 * head_turns]
    assert note == templates.omitted_note(cut.omitted_turns)
    assert cut.omitted_turns == 10 - len(kept) and _chars(cut.messages) <= 200
    tail_turns = len(kept) - head_turns
    assert tail_turns == (available - 28 * head_turns) // 28  # the tail takes the rest of the budget


def test_the_context_manager_gives_up_when_the_latest_turn_cannot_fit():
    messages = _conversation(3, size=500)
    assert manage_context(messages, _chars, 400) is None
    cut = manage_context(messages, _chars, 1200)  # room for one turn: the latest, not the head
    assert [m["content"][:3] for m in cut.messages[3:]] == ["a2:", "o2:"] and cut.omitted_turns == 2


# ------------------------------------------------------------------------------------------------ episodes


class FakeEnv:
    """The environment service's client surface, in memory: commands answer from a table."""

    def __init__(self, answers: dict[str, tuple[int, str]], diff: str = ""):
        self.answers, self.diff, self.calls, self.evaluated = answers, diff, [], None

    async def allocate(self, task_key, request_id=None):
        return {"lease_id": "L"}

    async def reset(self, lease, task_meta=None, **kw):
        return {"problem_statement": "`parse_thing` in pkg/mod.py returns 1", "cwd": "/testbed"}

    async def heartbeat(self, lease):
        pass

    def keep_alive(self, lease):
        return contextlib.nullcontext()

    async def exec_tool(self, lease, name, arguments):
        self.calls.append((name, arguments.get("command")))
        if name == "diff":
            return {"patch": self.diff}
        rc, out = self.answers.get(arguments["command"], (0, "ok\n"))
        return {"returncode": rc, "output": out}

    async def evaluate(self, lease, **request):
        self.evaluated = request
        return {"resolved": request.get("patch") == PATCH, "score": 1.0}

    async def close(self, lease):
        return True


class ScriptedEngine:
    """`/generate` that says the given texts (then `final`), each followed by EOS, with distinct log-probs."""

    def __init__(self, tokenizer, texts: list[str], final: str = "I am done."):
        self.tok, self.texts, self.final, self.inputs, self.outputs = tokenizer, list(texts), final, [], []

    async def generate(self, input_ids, sampling_params, return_logprob=True):
        text = self.texts.pop(0) if self.texts else self.final
        ids = self.tok.encode(text, add_special_tokens=False)[: sampling_params["max_new_tokens"] - 1]
        ids.append(self.tok.eos_token_id)
        lps = [-(len(self.outputs) + 1) - i / 1000 for i in range(len(ids))]
        self.inputs.append(list(input_ids))
        self.outputs.append((ids, lps))
        return {"text": self.tok.decode(ids, skip_special_tokens=True),
                "meta_info": {"output_token_logprobs": [[lp, t, None] for lp, t in zip(lps, ids)],
                              "finish_reason": {"type": "stop", "matched": ids[-1]}}}


@pytest.fixture(scope="module")
def tok(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


SCRIPT = [bash_response("grep -n parse_thing pkg/mod.py"),
          "I will just think about it.",  # no bash block: a format error
          bash_response("sed -i 's/x = 1/x = 2/' pkg/mod.py"),
          bash_response(templates.SUBMIT_COMMAND)]
ANSWERS = {"grep -n parse_thing pkg/mod.py": (0, "3:def parse_thing():\n"),
           templates.SUBMIT_COMMAND: (0, f"{templates.SUBMIT_SENTINEL}\n{PATCH}")}


def _run(tok, script=SCRIPT, max_context=4096, max_new=64, settings=AgentSettings(max_steps=6), judging=None,
         answers=ANSWERS, diff=""):
    engine = ScriptedEngine(tok, script)
    policy = SweEnginePolicy(engine, tok, {"max_new_tokens": max_new}, max_context)
    env = FakeEnv(answers, diff)

    async def go():
        episode = await run_episode(policy, env, "pkg__mod-1", settings, request_id="r",
                                    on_step=judging.on_step if judging else None)
        return episode, (await judging.scores(len(episode.turns)) if judging else None)

    episode, scores = asyncio.run(go())
    return (episode, policy, engine, env, scores) if judging else (episode, policy, engine, env)


def test_an_episode_submits_a_patch_and_is_evaluated(tok):
    episode, _, engine, env = _run(tok)
    assert (episode.status, episode.exit_status, episode.patch_source) == ("completed", "submitted", "submitted")
    assert episode.patch == PATCH and env.evaluated == {"patch": PATCH} and episode.reward == 1.0
    assert [s.format_error for s in episode.steps] == [False, True, False, False]
    assert [m["content"] for m in episode.messages if m["role"] == "user"][2] == templates.FORMAT_ERROR
    assert episode.messages[3]["content"] == templates.observation(0, "3:def parse_thing():\n", 5)
    assert len(engine.inputs) == 4 and ("bash", templates.SUBMIT_COMMAND) in env.calls


def test_without_a_submission_the_diff_is_the_fallback_and_no_change_is_minus_one(tok):
    idle = [bash_response("ls")] * 3
    episode, _, _, env = _run(tok, idle, settings=AgentSettings(max_steps=3), diff="")
    assert (episode.status, episode.exit_status, episode.patch_source) == ("truncated", "max_steps", "none")
    assert env.evaluated is None and episode.reward == -1.0  # an empty patch is not evaluated
    assert episode.messages[-1]["content"].endswith("REMINDER: You have no turns left.")
    episode, _, _, env = _run(tok, idle, settings=AgentSettings(max_steps=3), diff=PATCH)
    assert episode.patch_source == "git_diff_fallback" and env.evaluated == {"patch": PATCH} and episode.resolved


def test_step_samples_are_the_exact_contexts_and_the_sampled_ids(tok):
    from slime.models.chat_template import render_prompt_ids

    episode, policy, engine, _ = _run(tok)
    samples = step_samples(episode, Sample(group_index=3, index=7, prompt="p"), [1.0, -1.0, None, None])
    assert len(samples) == 4
    assert engine.inputs[0] == render_prompt_ids(tok, episode.messages[:2])  # [system, problem] as rendered
    for k, (s, (ids, lps)) in enumerate(zip(samples, engine.outputs)):
        assert s.tokens == engine.inputs[k] + ids and s.response_length == len(ids)
        assert s.rollout_log_probs == lps and s.loss_mask == [1] * len(ids)
        assert (s.group_index, s.index, s.metadata["step"]) == (3, 7, k)
        assert s.metadata["step_wise"]["step_indices"] == [k]
    for k in range(3):  # the next context = this context + the sampled ids + the observation's tokens
        ids = engine.outputs[k][0]
        assert engine.inputs[k + 1][: len(engine.inputs[k]) + len(ids)] == engine.inputs[k] + ids
        glue = tok.decode(engine.inputs[k + 1][len(engine.inputs[k]) + len(ids):])
        observation = episode.messages[3 + 2 * k]["content"]
        assert glue == f"\n<|im_start|>user\n{observation}<|im_end|>\n<|im_start|>assistant\n"


def test_the_trajectory_sample_masks_observations_and_keeps_the_sampled_ids(tok):
    episode, policy, engine, _ = _run(tok)
    s = trajectory_sample(episode, Sample(index=1), policy, 4096, tok, [1.0, -1.0, 1.0, None])
    prompt_len = len(engine.inputs[0])
    assert s.tokens[:prompt_len] == engine.inputs[0]
    assert s.tokens == engine.inputs[-1] + engine.outputs[-1][0]  # no cut: exactly the last context + its ids
    spans = s.metadata["step_wise"]["step_token_spans"]
    assert len(spans) == 4 and s.metadata["step_wise"]["prm_scores"] == [1.0, -1.0, 1.0, None]
    response = s.tokens[prompt_len:]
    for (a, b), (ids, lps) in zip(spans, engine.outputs):
        assert response[a:b] == ids and s.rollout_log_probs[a:b] == lps and s.loss_mask[a:b] == [1] * len(ids)
    inside = {i for a, b in spans for i in range(a, b)}
    assert all(m == 0 and lp == 0.0 for i, (m, lp) in enumerate(zip(s.loss_mask, s.rollout_log_probs))
               if i not in inside)
    assert sum(s.loss_mask) == sum(len(ids) for ids, _ in engine.outputs)
    assert s.status == Sample.Status.COMPLETED and not s.metadata["response_cut"]


def test_a_cut_context_is_rendered_from_the_kept_turns_and_not_trained_in_the_trajectory(tok):
    from slime.models.chat_template import render_prompt_ids

    long_output = "line of output\n" * 40
    script = [bash_response(f"echo {k}") for k in range(6)]
    answers = {f"echo {k}": (0, long_output) for k in range(6)}
    first = render_prompt_ids(tok, [templates.system_message(), templates.instance_message("x")])
    episode, policy, engine, _ = _run(tok, script, max_context=len(first) + 700, max_new=32, answers=answers,
                                      settings=AgentSettings(max_steps=6))
    managed = [bool(t.managed) for t in episode.turns]
    assert managed[0] is False and any(managed), managed
    k = managed.index(True)
    turn = episode.turns[k]
    assert len(turn.input_ids) <= policy.max_input_tokens and turn.omitted_messages >= 1
    text = tok.decode(turn.input_ids)
    assert templates.OMITTED_NOTE.format(n=turn.omitted_messages) in text
    assert text.count("<|im_start|>assistant\n") >= 2  # the latest turn and the generation prompt
    s = trajectory_sample(episode, Sample(index=0), policy, policy.max_context_tokens, tok)
    spans = s.metadata["step_wise"]["step_token_spans"]
    for j, ((a, b), m) in enumerate(zip(spans, managed)):
        assert set(s.loss_mask[a:b]) <= ({0} if m else {1}), j
    assert s.metadata["context_managed_steps"] == sum(managed)
    assert len(s.tokens) <= policy.max_context_tokens
    steps = step_samples(episode, Sample(index=0))
    assert steps[k].tokens[: len(turn.input_ids)] == turn.input_ids and steps[k].metadata["context_managed"]


def test_prm_scores_stay_on_their_step_after_a_format_error(tok):
    seen = {}

    class Recording(SweRuleJudge):
        async def score_step(self, problem, records, *, seed=0):
            seen[records[-1].index] = (records[-1].command, records[-1].output)
            return await super().score_step(problem, records, seed=seed)

    judge = Recording()
    judging = StepJudging(judge)
    script = [bash_response("grep -n parse_thing pkg/mod.py"), "no command here",
              bash_response("python -m pytest -q tests"), bash_response(templates.SUBMIT_COMMAND)]
    answers = {**ANSWERS, "python -m pytest -q tests": (1, "1 failed, 3 passed in 0.05s\n")}
    episode, _, _, _, scores = _run(tok, script, settings=AgentSettings(max_steps=6, track_diff=True),
                                    judging=judging, answers=answers)
    # 0: relevant but no progress (-1); 1: format error (-1); 2: tests ran (+1); 3: submit (left to the outcome)
    assert scores == [-1.0, -1.0, 1.0, None]
    assert seen[2] == ("python -m pytest -q tests", "1 failed, 3 passed in 0.05s\n")  # its own command and output
    assert seen[1] == (None, "")
    samples = step_samples(episode, Sample(index=0), scores)
    assert [s.metadata["step_wise"]["prm_scores"] for s in samples] == [[-1.0], [-1.0], [1.0], [None]]
    rewards = asyncio.run(reward_func(None, samples))
    assert [s.metadata["step_wise"]["step_scores_with_outcome"] for s in samples] == [[0.0], [0.0], [2.0], [1.0]]
    assert all(r["score"] == 1.0 and r["acc"] == 1.0 for r in rewards)


def test_the_rule_judge_rewards_relevant_edits_and_the_llm_judge_sees_the_step():
    from generate_with_swe_remote import StepRecord

    problem = "`parse_thing` in pkg/mod.py returns 1.\nTraceback:\n  File \"/testbed/pkg/util.py\", line 3, in helper"
    assert {"parse_thing", "mod.py", "util.py", "helper"} <= names_in(problem)
    judge = SweRuleJudge()
    edit = StepRecord(0, "r", "sed -i 's/1/2/' pkg/mod.py", 0, "", diff_changed=True)
    other = StepRecord(0, "r", "sed -i 's/1/2/' README.md", 0, "", diff_changed=True)
    broken = StepRecord(0, "r", "sed -i 's/1/2/' pkg/mod.py", 2, "sed: error", diff_changed=False)
    timeout = StepRecord(0, "r", "python -m pytest tests", -1, "Command timed out after 180 s", timed_out=True)
    scores = [asyncio.run(judge.score_step(problem, [r])) for r in (edit, other, broken, timeout)]
    assert scores == [1.0, -1.0, -1.0, -1.0]
    records = [StepRecord(0, "r0", None), StepRecord(1, "THOUGHT: run it\n```bash\ncat x\n```", "cat x", 0, "X" * 5000)]
    user = judge_messages(problem, records)[1]["content"]
    assert "format error" in user and "## Current step 1" in user and "THOUGHT: run it" in user
    assert "characters omitted" in user and "\\boxed{1}" in user


def test_the_instance_comes_from_upstreams_row_or_the_prompt():
    assert instance_id_of(Sample(prompt="text", metadata={"instance": {"instance_id": "a__b-1"}})) == "a__b-1"
    assert instance_id_of(Sample(prompt={"instance_id": "a__b-2"})) == "a__b-2"
    assert instance_id_of(Sample(prompt="t", metadata={"instance_id": "a__b-3"})) == "a__b-3"
    with pytest.raises(ValueError):
        instance_id_of(Sample(prompt="just text"))


def test_the_llm_judge_votes_m_times_on_executed_steps_only():
    from slime.agentic.prm import StepJudge
    from generate_with_swe_remote import StepRecord
    from swe_prm import SweLLMJudge

    class Chat:
        def __init__(self):
            self.bodies = []

        async def chat(self, body):
            self.bodies.append(body)
            vote = ["\\boxed{1}", "\\boxed{-1}", "\\boxed{1}"][len(self.bodies) % 3]
            return {"choices": [{"message": {"content": f"reasoning... {vote}"}}]}

    chat = Chat()
    judge = SweLLMJudge(StepJudge(chat, m=3))
    ran = [StepRecord(0, "r0", None), StepRecord(1, "THOUGHT\n```bash\nls\n```", "ls", 0, "a.py\n")]
    assert asyncio.run(judge.score_step("issue", ran[:1])) == -1.0 and chat.bodies == []  # a format error: no call
    score = asyncio.run(judge.score_step("issue", ran, seed=5))
    assert score == pytest.approx(1 / 3) and len(chat.bodies) == 3
    assert len({b["seed"] for b in chat.bodies}) == 3 and "## Current step 1" in chat.bodies[0]["messages"][1]["content"]
    submit = StepRecord(2, "r", templates.SUBMIT_COMMAND, 0, "", submit=True)
    assert asyncio.run(judge.score_step("issue", ran + [submit])) is None and len(chat.bodies) == 3


def test_the_gold_agent_applies_the_patch_by_a_here_document_then_submits():
    from generate_with_swe_remote import gold_patch_responses, parse_bash_block
    from swe_templates import SUBMIT_COMMAND

    patch = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
    apply, submit = gold_patch_responses(patch)
    assert parse_bash_block(apply) == f"git apply <<'GOLD_PATCH_EOF'\n{patch}GOLD_PATCH_EOF"
    assert parse_bash_block(submit) == SUBMIT_COMMAND
    with pytest.raises(ValueError, match="here-document marker"):
        gold_patch_responses(patch + "+GOLD_PATCH_EOF\n")


def test_the_rule_judge_credits_a_state_once_and_decides_by_the_hosts_test_share_when_it_moves():
    from generate_with_swe_remote import StepRecord

    problem = "`parse_thing` in pkg/mod.py returns 1."
    judge = SweRuleJudge()

    def step(i, command, rc=0, state="s0", tests=False, before=None, after=None, changed=True):
        return StepRecord(i, "r", command, rc, "", diff_changed=changed, tests_ran=tests, state=state,
                          progress_before=before, progress=after)

    edit = "sed -i 's/1/2/' pkg/mod.py"
    run_tests = "python -m pytest -q tests"
    records = [step(0, edit, state="a"),                                   # a new state: +1
               step(1, run_tests, rc=1, state="a", tests=True, changed=False),  # tests in a state not tested: +1
               step(2, run_tests, rc=1, state="a", tests=True, changed=False),  # the same again: -1
               step(3, edit, state="b"),                                   # another new state: +1
               step(4, edit, state="a"),                                   # back to a state seen before: -1
               step(5, run_tests, rc=1, state="a", tests=True, changed=False)]  # its tests already ran: -1
    scores = [asyncio.run(judge.score_step(problem, records[:i + 1])) for i in range(len(records))]
    assert scores == [1.0, 1.0, -1.0, 1.0, -1.0, -1.0]
    # the host's share of the hidden tests moved: its sign decides, whatever else holds
    up = step(0, "sed -i 's/a/b/' README.md", state="c", before=0.5, after=1.0)  # irrelevant by name, yet it fixed
    down = step(0, edit, state="d", before=1.0, after=0.5)
    same = step(0, "echo '3 passed in 0.1s'", state="e", before=0.5, after=0.5)  # printed success, no runner
    assert [asyncio.run(judge.score_step(problem, [r])) for r in (up, down, same)] == [1.0, -1.0, -1.0]
