"""The SWE agent's messages (upstream's mini-swe-agent `swebench.yaml` semantics, in our own words).

* `SYSTEM_TEMPLATE`: a shell agent that answers with a THOUGHT and exactly ONE fenced bash block, with an example;
* `INSTANCE_TEMPLATE`: the issue, where the code is, the workflow, the rules, useful commands and the submit command;
* `observation(returncode, output, turns_left)`: ``<returncode>..</returncode>`` + ``<output>..</output>``, long
  outputs elided in the middle (the first and last 5,000 characters kept), then the turns-left reminder;
* `FORMAT_ERROR`: what the model sees after a response without a bash block (no reminder, as upstream);
* `OMITTED_NOTE`: the message that stands in for turns left out by the context manager.
"""

from __future__ import annotations

SUBMIT_SENTINEL = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
SUBMIT_COMMAND = f"echo {SUBMIT_SENTINEL} && git add -A && git diff --cached"
MAX_OUTPUT_CHARS = 10_000  # an output this long or longer is shown as head + elision + tail
ELIDE_HEAD_CHARS = 5_000
ELIDE_TAIL_CHARS = 5_000

SYSTEM_TEMPLATE = """You are a software engineer working in a Linux shell. You fix issues in a code repository by \
running one shell command at a time and reading what it prints.

Every response you write has two parts:
1. a THOUGHT section, where you explain what you want to find out or change, and why;
2. exactly ONE bash code block with the one command (or the commands joined with && or ||) to run next.

Write it like this:

THOUGHT: I want to see which files the repository has before I open any of them.

```bash
ls -la
```

A response with no bash block, or with more than one, is a format error: only the first bash block runs. Each \
command starts in a fresh shell, so a `cd` or a variable does not carry over to the next response. Nothing is \
interactive: editors such as vim or nano, and commands that wait for input, will not work."""

INSTANCE_TEMPLATE = """<issue>
{problem_statement}
</issue>

The repository with this issue is checked out in {cwd}, the current directory of every command. Change the \
non-test source files so that the issue is fixed, in a way that is general and consistent with the rest of the code.

Suggested workflow:
1. Find and read the code the issue is about.
2. Write a small script that shows the problem, and run it.
3. Edit the source code to fix the problem.
4. Run your script again to check that the problem is gone, and think about edge cases.
5. Submit your changes.

Rules:
- Do not change tests or test configuration (tests/, test_*.py, conftest.py, setup.cfg, pyproject.toml, tox.ini): \
  hidden tests decide whether the issue is fixed, and changes to tests are not accepted.
- One bash block per response, with a THOUGHT before it.
- There is no network access.

Useful commands:
- look at a file: `cat -n path/to/file.py` or `sed -n '10,40p' path/to/file.py`
- search: `grep -rn "name" src/`
- edit a line: `sed -i 's/old/new/' path/to/file.py`
- write a file: `cat <<'EOF' > path/to/file.py` ... `EOF`
- run the tests: `python -m pytest -q tests/`

When you are done, submit with exactly this command, on its own, and do not run anything after it:

```bash
{submit_command}
```"""

FORMAT_ERROR = ("<returncode>-1</returncode><output>Your response has no ```bash block, so nothing was run. Write a "
                "THOUGHT, then exactly one ```bash block with the command to run.</output>")

OBSERVATION_TEMPLATE = "<returncode>{returncode}</returncode>\n<output>\n{output}</output>"
ELIDED_TEMPLATE = (
    "<returncode>{returncode}</returncode>\n"
    "<warning>The output is {length} characters long, too long to show in full: its middle was cut out. Narrow "
    "the command down (grep for what you need, show fewer lines with head, tail or sed -n) instead of printing this "
    "much.</warning>\n"
    "<output_head>\n{head}\n</output_head>\n"
    "<elided_chars>\n{elided} characters elided\n</elided_chars>\n"
    "<output_tail>\n{tail}\n</output_tail>"
)
OMITTED_NOTE = "[... {n} earlier turn(s) of this conversation left out to fit the context window ...]"


def system_message() -> dict:
    return {"role": "system", "content": SYSTEM_TEMPLATE}


def instance_message(problem_statement: str, cwd: str = "/testbed") -> dict:
    return {"role": "user", "content": INSTANCE_TEMPLATE.format(problem_statement=problem_statement.strip(),
                                                                 cwd=cwd, submit_command=SUBMIT_COMMAND)}


def turns_left_reminder(turns_left: int) -> str:
    if turns_left == 1:
        return "REMINDER: You only have 1 turn left. Submit your changes now with the submit command."
    if turns_left <= 0:
        return "REMINDER: You have no turns left."
    return f"REMINDER: You have {turns_left} turns left to complete the task."


def format_output(returncode: int, output: str) -> str:
    """The observation of an executed command, without the reminder (upstream's 10,000-character rule)."""
    if len(output) < MAX_OUTPUT_CHARS:
        return OBSERVATION_TEMPLATE.format(returncode=returncode, output=output)
    return ELIDED_TEMPLATE.format(returncode=returncode, length=len(output), head=output[:ELIDE_HEAD_CHARS],
                                  elided=len(output) - ELIDE_HEAD_CHARS - ELIDE_TAIL_CHARS,
                                  tail=output[-ELIDE_TAIL_CHARS:])


def observation(returncode: int, output: str, turns_left: int) -> str:
    return f"{format_output(returncode, output)}\n{turns_left_reminder(turns_left)}"


def omitted_note(n_turns: int) -> dict:
    return {"role": "user", "content": OMITTED_NOTE.format(n=n_turns)}
