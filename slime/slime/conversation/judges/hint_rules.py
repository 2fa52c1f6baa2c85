"""A CPU hint judge for small setups without a capable judge model: corrective feedback becomes the hint.

The next state's last user message is read clause by clause; each recognised correction is rewritten as
an instruction to the assistant ("too long, one sentence" -> "Answer in one short sentence.", "stop using
bullet points" -> "Do not use bullet points.", "no, I meant Paris, Texas" -> "The user meant Paris,
Texas.", "too cold, say hi first" -> "Use a warmer tone. Say hi first."). A tool error caused by the
response becomes a hint quoting the key error line. At most two instructions are kept (the hint is 1-2
sentences), explicit ones before bare judgements ("too cold"). A correction no rule rewrites is kept in
the user's own words; a bare "wrong" / "try again" carries no hindsight information and is not accepted,
and neither is praise or a neutral follow-up.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slime.conversation.judges.base import TurnForJudge, Vote
from slime.conversation.judges.hints import HintResult
from slime.conversation.judges.prompts import last_user_request
from slime.conversation.judges.rules import (  # the vocabulary of complaints is shared with the PRM rules
    AI_WORDS,
    REPLY_IS,
    classify_tool_result,
    classify_user_text,
    last_user_text,
    repeated_request,
)
from slime.conversation.openclaw_conventions import clean_user_text, is_internal_context, message_text

__all__ = ["HintMatch", "RulesHintJudge", "error_line", "rules_hint", "tool_error_hint", "user_feedback_hint"]

MAX_INSTRUCTIONS = 2
MAX_QUOTE = 240  # characters of an error line or of the user's own words kept in a hint
MAX_SCAN = 1500  # characters of a user reply the rewrite rules read


@dataclass(frozen=True)
class HintMatch:
    hint: str  # an instruction to the assistant
    rule: str  # e.g. "length", "dont", "tool_error", "verbatim"
    phrase: str = ""  # the text that matched

    def describe(self) -> str:
        return f"{self.rule}: {self.phrase!r}" if self.phrase else self.rule


# ---------------------------------------------------------------------------------------------------
# Small text helpers
# ---------------------------------------------------------------------------------------------------

_PERSON = [  # the user's first person, as the assistant should read it
    (re.compile(r"\bI'm\b|\bI am\b", re.I), "the user is"),
    (re.compile(r"\bI've\b", re.I), "the user has"),
    (re.compile(r"\bI'd\b", re.I), "the user would"),
    (re.compile(r"\bI'll\b", re.I), "the user will"),
    (re.compile(r"\b(?:my|mine)\b", re.I), "the user's"),
    (re.compile(r"\bmyself\b", re.I), "the user"),
    (re.compile(r"\bme\b", re.I), "the user"),
    (re.compile(r"\bI\b"), "the user"),
]
_KEEP_VERB = {"can", "could", "will", "would", "should", "might", "must", "may", "shall", "did", "was", "had",
              "didn't", "wasn't", "won't", "wouldn't", "couldn't", "shouldn't", "can't", "cannot", "also", "just",
              "really", "still", "never", "always", "only", "already", "actually", "usually", "often", "then", "and",
              "or", "but", "said", "meant", "wanted", "asked", "told", "thought"}
_THIRD_PERSON = {"have": "has", "haven't": "hasn't", "do": "does", "don't": "doesn't", "am": "is", "go": "goes"}
_I_VERB = re.compile(r"\bI (\w+(?:'t)?)\b")


def _third_person(m: re.Match) -> str:
    verb = m.group(1)
    lower = verb.lower()
    if lower in _THIRD_PERSON:
        return f"the user {_THIRD_PERSON[lower]}"
    if lower in _KEEP_VERB or lower.endswith(("ed", "ly", "'t")) or not lower.isalpha():
        return f"the user {verb}"
    if lower.endswith(("s", "sh", "ch", "x", "o")):
        return f"the user {verb}es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return f"the user {verb[:-1]}ies"
    return f"the user {verb}s"
_TRAILING_FILLER = re.compile(r"(?:[\s,]+(?:please|pls|plz|thanks|thank you|thx|instead|anymore|any more|again|ok|okay"
                              r"|next time|from now on|going forward|in the future))+\s*$|[\s,:\-]+$", re.I)
_LEADING_FILLER = re.compile(r"^(?:just|also|please|the following:)\s+", re.I)


def _from_assistant_view(text: str) -> str:
    text = _I_VERB.sub(_third_person, re.sub(r"\bI'm\b|\bI am\b", "the user is", text))
    for pattern, replacement in _PERSON:
        text = pattern.sub(replacement, text)
    return text


def _tidy(fragment: str) -> str:
    """A captured fragment without trailing politeness or punctuation, in the assistant's point of view."""
    fragment = fragment.strip()
    while len(fragment) >= 2 and fragment[0] == fragment[-1] and fragment[0] in "\"'`":
        fragment = fragment[1:-1].strip()  # the whole phrase quoted
    # a stray quote at either end goes; one that opens or closes a quotation inside stays
    if fragment[:1] in {'"', "'", "`"} and fragment.count(fragment[0]) == 1:
        fragment = fragment[1:].strip()
    if fragment[-1:] in {'"', "'", "`"} and fragment.count(fragment[-1]) == 1:
        fragment = fragment[:-1].strip()
    if fragment.count('"') % 2:  # 'sign off with "Best, Ana"' keeps its closing quote
        fragment += '"'
    previous = None
    while previous != fragment:
        previous = fragment
        fragment = _TRAILING_FILLER.sub("", fragment).strip()
        fragment = _LEADING_FILLER.sub("", fragment).strip()
    return _from_assistant_view(fragment)


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


_IRREGULAR = {"done": "do", "made": "make", "read": "read", "run": "run", "written": "write", "gone": "go",
              "taken": "take", "given": "give", "seen": "see", "been": "be", "told": "tell", "said": "say",
              "found": "find", "kept": "keep", "left": "leave", "sent": "send", "built": "build", "put": "put",
              "set": "set", "got": "get", "gotten": "get", "thought": "think", "bought": "buy", "chosen": "choose",
              "shown": "show", "known": "know", "begun": "begin", "used": "use", "asked": "ask", "tried": "try"}
_KEEP_T = {"edit", "visit", "limit", "exit", "credit", "audit", "inherit", "benefit", "profit", "target", "budget",
           "commit", "omit", "submit", "permit", "split", "format", "request", "test", "list", "print", "check"}


def _base_form(word: str) -> str:
    """'checked' -> 'check', 'used' -> 'use', 'verified' -> 'verify', 'stopped' -> 'stop' (good enough)."""
    lower = word.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if not lower.endswith("ed") or len(lower) <= 4:
        return word
    if lower.endswith("ied"):
        return word[:-3] + "y"
    stem = word[:-2]
    s = stem.lower()
    if len(s) >= 3 and s[-1] == s[-2] and s[-1] not in "lsz":  # stopped, committed
        return stem[:-1]
    if s in _KEEP_T or s.endswith(("en", "er", "on", "el", "al", "ow", "ew", "ay", "ey", "oy")):
        return stem
    # a single vowel before a final consonant that takes a silent e: used, saved, included, updated
    if len(s) >= 2 and s[-1] in "tdsvzcgkb" and s[-2] in "aeiou" and (len(s) < 3 or s[-3] not in "aeiou"):
        return stem + "e"
    if s.endswith(("rs", "ns", "ls", "rg", "rv", "lv", "nc", "rc")):  # nursed, sensed, solved, forced
        return stem + "e"
    return stem


_GERUND = {"using": "use", "adding": "add", "including": "include", "putting": "put", "writing": "write",
           "making": "make", "giving": "give", "sending": "send", "asking": "ask", "repeating": "repeat",
           "guessing": "guess", "assuming": "assume", "changing": "change", "calling": "call",
           "mentioning": "mention", "apologizing": "apologize", "apologising": "apologise", "saying": "say",
           "inventing": "invent", "making up": "make up", "showing": "show", "explaining": "explain",
           "translating": "translate", "deleting": "delete", "removing": "remove", "touching": "touch",
           "running": "run", "printing": "print", "formatting": "format", "suggesting": "suggest",
           "summarizing": "summarize", "summarising": "summarise", "listing": "list", "starting": "start",
           "ending": "end", "shouting": "shout", "capitalizing": "capitalize", "linking": "link",
           "recommending": "recommend", "rewriting": "rewrite", "modifying": "modify", "editing": "edit"}


# ---------------------------------------------------------------------------------------------------
# Error lines (tool output or a traceback the user pasted)
# ---------------------------------------------------------------------------------------------------

# "ModuleNotFoundError: No module named 'foo'", "requests.exceptions.ConnectionError: ...", "KeyboardInterrupt"
_EXCEPTION_LINE = re.compile(
    r"^\s*((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::.*)?)\s*$", re.M)
_ERROR_WORD_LINE = re.compile(r"^\s*((?:[\w./-]+:\s)?(?:error|fatal|panic|npm err!|failed|failure)\b.*)$", re.I | re.M)


def error_line(text: str) -> str | None:
    """The line that says what went wrong in a tool's (or a pasted) error output, or None when it is fine.

    A Python traceback's last exception line wins; otherwise the first line with an error label; otherwise
    the line holding whatever made the tool-error rules flag the output.
    """
    verdict = classify_tool_result(text)
    if verdict.score >= 0:
        return None
    exceptions = _EXCEPTION_LINE.findall(text)
    if exceptions:
        return _clip(exceptions[-1])
    labelled = _ERROR_WORD_LINE.search(text)
    if labelled:
        return _clip(labelled.group(1))
    for line in text.splitlines():
        if verdict.phrase and verdict.phrase.lower() in line.lower():
            return _clip(line)
    return _clip(verdict.phrase or text.strip().splitlines()[0])


def _clip(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_QUOTE else line[: MAX_QUOTE - 3] + "..."


def _call_names(response_message: dict | None) -> dict[str, str]:
    names = {}
    for call in (response_message or {}).get("tool_calls") or []:
        name = ((call or {}).get("function") or {}).get("name")
        if name:
            names[str((call or {}).get("id") or "")] = name
    return names


def tool_error_hint(next_state: Sequence[dict], response_message: dict | None = None) -> HintMatch | None:
    """A hint quoting the first failing tool result of the next state."""
    names = _call_names(response_message)
    for message in next_state:
        if message.get("role") != "tool":
            continue
        line = error_line(message_text(message))
        if line is None:
            continue
        name = names.get(str(message.get("tool_call_id") or "")) or message.get("name")
        if not name and len(set(names.values())) == 1:
            name = next(iter(names.values()))
        what = f"The previous `{name}` call" if name else "The previous command"
        return HintMatch(f"{what} failed with: {line.rstrip('.')}. Avoid or fix this cause instead of repeating it.",
                         "tool_error", line)
    return None


# ---------------------------------------------------------------------------------------------------
# User feedback rewrites
# ---------------------------------------------------------------------------------------------------

# where a clause starts, and how a captured phrase ends
_START = r"(?:^|(?<=[.!?;:,\n])\s*|\b(?:but|and|so|also|just|please|pls|ok|okay|oh|hey|and please)\s+)"
# A quotation is read whole, so the "!" in 'start with "Sure!" and then answer' ends no phrase.
_QUOTED = r'"[^"\n]{0,100}"'
_UPTO = rf"(?P<x>(?:{_QUOTED}|[^.!?;,\n])+?)"  # up to a comma or sentence end
_UPTO_MAYBE = rf"(?P<x>(?:{_QUOTED}|[^.!?;,\n])*?)"  # the same, possibly empty ("stop apologizing")
_UPTO_SENTENCE = rf"(?P<x>(?:{_QUOTED}|[^.!?;\n])+?)"  # commas allowed ("Paris, Texas")
_END = r"\s*(?=$|[.!?;,\n]|\s(?:please|pls|thanks|thank you|instead|anymore)\b)"
_END_SENTENCE = r"\s*(?=$|[.!?;\n])"

_LANGUAGES = ("english|french|german|spanish|italian|portuguese|dutch|swedish|norwegian|danish|finnish|polish|"
              "czech|greek|turkish|russian|ukrainian|arabic|hebrew|hindi|bengali|urdu|chinese|mandarin|cantonese|"
              "japanese|korean|vietnamese|thai|indonesian|malay|persian|farsi|swahili|romanian|hungarian|catalan")
_TONES = ("formal|informal|casual|polite|friendly|professional|serious|playful|enthusiastic|warm|neutral|"
          "confident|direct|blunt|cheerful|respectful|empathetic|humble|assertive")
_QUALITIES = "specific|precise|concrete|accurate|careful|clear|explicit|thorough|rigorous|honest|practical"
_ADDABLE = (r"examples?|sources?|links?|references?|citations?|comments?|docstrings?|tests?|type hints?|error handling"
            r"|explanations?|summary|steps?|units?|dates?|prices?|code|a diagram|screenshots?|urls?|numbers?"
            r"|timestamps?|headings?|headers?|totals?|the (?:output|result|command|reasoning|math|calculation)")

Rewrite = Callable[[re.Match], "str | None"]


def _length_limit(m: re.Match) -> str | None:
    unit = m.group("unit").lower()
    if unit.startswith(("sentence", "line", "word", "paragraph")) and not m.group("n"):
        return {"s": "Answer in one short sentence.", "l": "Answer in a single line.",
                "w": "Answer in one word.", "p": "Answer in one short paragraph."}[unit[0]]
    if not m.group("n"):  # "put it in bullet points": a format, not a length ("in characters": nothing to keep)
        return "Format the answer as bullet points." if unit == "bullet points" else None
    n = m.group("n").strip()
    return f"Keep the answer to at most {n} {unit}."


def _dont(m: re.Match) -> str | None:
    verb, rest = m.group("verb"), _tidy(m.group("x") or "")
    lowered = verb.lower()
    if lowered in {"worry", "mind", "bother", "know", "think", "understand", "care", "see", "get", "have",
                   "remember", "want", "need", "like", "mean", "be", "forget"}:
        return None
    verb = _GERUND.get(lowered, verb)
    return _sentence(f"Do not {verb} {rest}".strip())


def _stop(m: re.Match) -> str:
    gerund, rest = m.group("verb"), _tidy(m.group("x") or "")
    base = _GERUND.get(gerund.lower())
    return _sentence(f"Do not {base} {rest}" if base else f"Stop {gerund} {rest}".strip())


def _avoid(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    if not thing or thing.lower() in {"questions", "question", "problem", "problems", "worries", "need"}:
        return None
    first = thing.split()[0].lower()
    if first.endswith("ing") and first in _GERUND:
        return _sentence(f"Do not {_GERUND[first]} {' '.join(thing.split()[1:])}")
    return _sentence(f"Do not use {thing}")


def _should_have(m: re.Match) -> str | None:
    words = _tidy(m.group("x")).split()
    if not words:
        return None
    negated = bool(m.group("neg") or m.group("neg0") or m.group("neg1"))
    words[0] = _base_form(words[0])
    if words[0].lower() in {"be", "know"} and not negated and len(words) < 2:
        return None
    body = " ".join(words)
    if not negated and body.lower().startswith("know that "):
        body = "Note that " + body[len("know that "):]
    return _sentence(f"Do not {body}" if negated else body)


def _forgot(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    if not thing:
        return None
    if m.group("to"):
        return _sentence(f"Remember to {thing}")
    return _sentence(f"Include {thing}")


def _meant(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    if not thing or thing.lower() in {"it", "that", "this", "what the user said", "something else"}:
        return None
    verb = m.group("verb").lower()
    if verb.startswith("asked"):
        return _sentence(f"The user asked for {thing}")
    if verb.startswith(("was asking", "was talking", "was referring")):
        return _sentence(f"The user meant {thing}")
    if verb.startswith("want"):
        return _sentence(f"The user wanted {thing}")
    if verb.startswith("said"):
        return _sentence(f"The user said {thing}")
    return _sentence(f"The user meant {thing}")


def _not_but(m: re.Match) -> str | None:
    wrong, right = _tidy(m.group("a")), _tidy(m.group("x"))
    if not wrong or not right:
        return None
    return _sentence(f"The user wants {right}, not {wrong}")


def _should_be(m: re.Match) -> str | None:
    right = _tidy(m.group("x"))
    wrong = _tidy(m.group("y") or "")
    if not right:
        return None
    return _sentence(f"It should be {right}, not {wrong}" if wrong else f"It should be {right}")


def _actually(m: re.Match) -> str | None:
    fact = _tidy(m.group("x"))
    return _sentence(f"Note that {fact}") if len(fact.split()) >= 2 else None


def _language(m: re.Match) -> str:
    return f"Answer in {(m.group('lang') or m.group('lang2')).capitalize()}."


def _dislike(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    if not thing or thing.lower() in {"it", "that", "this", "to"} or thing.lower().startswith("to "):
        return None
    return _sentence(f"Leave out {thing}")


def _as_instruction(m: re.Match) -> str | None:
    """The captured words, already imperative ("ask before deleting files"), as a sentence; how the reply should
    open or end as a rule about the reply (`_reply_rule`)."""
    words = _tidy(m.group("x"))
    if len(words.split()) < 2:
        return None
    if _BARE_NUMBERED_LIST.search(words):  # "write it as a numbered list": with its markers (NUMBERED_LIST_RULE)
        return NUMBERED_LIST_RULE
    return _reply_rule(words)


# How a reply should open or end, said as a rule about the reply: measured on SmolLM2-135M-Instruct told each
# hint (the hinted teacher's probability of opening with "Sure!" over 24 prompts), 'Start with "Sure!" before
# the answer.' gave 0.02, 'Start your reply with "Sure!" before the answer.' 0.37 and 'Your reply must start with
# "Sure!" before the answer.' 0.81; for a greeting, 'Start with a hi or hello' 0.01, with the words quoted
# ('"Hi" or "Hello"') 0.42, and 'a greeting such as "Hello!"' 0.92 against 0.004 for 'a greeting' alone.
_OPENING_VERB = re.compile(r"^(?P<verb>start|begin|open|lead|end|finish|close)\s+(?:(?:your|the)\s+(?:next\s+)?"
                           r"(?:reply|response|answer|message)\s+)?(?P<prep>with|by)\s+(?P<rest>.+)$",
                           re.IGNORECASE | re.DOTALL)
_BARE_GREETING = re.compile(r'(?<!["\'\w-])(?P<w>hi|hello|hey|howdy|good morning)(?![\w"\'-])', re.IGNORECASE)
_A_GREETING = re.compile(r"\ba\s+(?:(?:friendly|short|quick|nice|warm)\s+)?greeting\b(?!\s+(?:such as|like)\b)",
                         re.IGNORECASE)
GREETING_EXAMPLE = '"Hello!"'


def _quote_greetings(text: str) -> str:
    """Greeting words named bare ("a hi or hello") as the words to write ('"Hi" or "Hello"'), and a greeting
    named only as such given an example ('a greeting such as "Hello!"')."""
    text = re.sub(r"\ba\s+(?=(?:hi|hello|hey|howdy)\b)", "", text, flags=re.IGNORECASE)
    text = _BARE_GREETING.sub(lambda g: f'"{g.group("w")[0].upper()}{g.group("w")[1:].lower()}"', text)
    return _A_GREETING.sub(lambda g: f"{g.group(0)} such as {GREETING_EXAMPLE}", text)


def _reply_rule(words: str) -> str:
    """ "start with X" -> 'Your reply must start with X', "end your reply with X" -> 'Your reply must end with X';
    quoted words for the reply as a rule too (`_reply_words_rule`); anything else (also "start each paragraph with
    X", "sign off with X") as it was said."""
    found = _OPENING_VERB.match(words)
    # "start by checking the logs" is about what to do first, not how the reply reads: as said
    if not found or (found.group("prep").lower() == "by" and re.match(r"\w+ing\b", found.group("rest"))):
        return _reply_words_rule(words)
    where = "end" if found.group("verb").lower() in {"end", "finish", "close"} else "start"
    rest = found.group("rest")
    if where == "start" and not re.search(r"[\"']", rest):  # a quotation is the user's own words, kept as is
        rest = _quote_greetings(rest)
    return _sentence(f"Your reply must {where} {found.group('prep').lower()} {rest}")


_UNITS = {"metric": "metric units", "imperial": "imperial units", "celsius": "degrees Celsius",
          "fahrenheit": "degrees Fahrenheit", "si": "SI units", "us": "US customary units",
          "24-hour": "the 24-hour clock", "24h": "the 24-hour clock", "12-hour": "the 12-hour clock",
          "12h": "the 12-hour clock"}


def _units(m: re.Match) -> str:
    unit = m.group("u").lower()
    return f"Use {_UNITS.get(unit, unit)}."


def _tone(m: re.Match) -> str:
    direction, adjective = m.group("dir").lower(), m.group("adj").lower()
    if adjective == "informal":
        adjective, direction = "formal", ("less" if direction in {"more"} else "more")
    less = direction in {"less", "too", "so", "way too", "overly"}
    return f"Use a {'less' if less else 'more'} {adjective} tone."


def _quality(m: re.Match) -> str:
    return f"Be more {m.group('adj').lower()}."


def _add(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    return _sentence(f"Include {thing}") if thing else None


_FORMATS = {"table": "a table", "bulleted list": "a bulleted list", "bullet list": "a bulleted list",
            "bullet points": "bullet points", "bullet point": "bullet points", "numbered list": "a numbered list",
            "list": "a list", "code block": "a code block", "json": "JSON", "yaml": "YAML", "csv": "CSV",
            "markdown": "Markdown"}


# A numbered list named with its markers, as a greeting is given an example: SmolLM2-135M-Instruct told each hint
# (24 training problems, one sample each at temperature 0.6, the numbered persona's rating) was pleased 0.17 with
# 'Format the answer as a numbered list.' and 0.38 with 'Write it as a numbered list: 1., 2., 3.' (untold 0.00),
# the probability of opening with "1" 0.12 against 0.24; the "Step 1, Step 2" form the steps persona's users write
# themselves is the same shape.
NUMBERED_LIST_RULE = "Write it as a numbered list: 1., 2., 3."
# "as / in / into a numbered list" at the end of an instruction, with no markers of the user's own after it
_BARE_NUMBERED_LIST = re.compile(r"^(?:re)?write\s+(?:it|this|that|them|the\s+\w+)\s+(?:as|in|into)\s+(?:a\s+)?"
                                 r"numbered\s+list$", re.IGNORECASE)


def _format(m: re.Match) -> str:
    shape = m.group("f").lower()
    if shape in {"plain text", "prose", "paragraph", "paragraphs"}:
        return "Answer in plain prose."
    if shape == "numbered list":
        return NUMBERED_LIST_RULE
    return f"Format the answer as {_FORMATS.get(shape, shape)}."


def _use(m: re.Match) -> str | None:
    thing = _tidy(m.group("x"))
    if not thing or thing.lower() in {"it", "that", "this", "them"}:
        return None
    other = _tidy(m.group("y") or "") if "y" in m.groupdict() else ""
    if other:
        return _sentence(f"Use {thing} instead of {other}")
    return _sentence(f"Use {thing} instead") if m.group("instead") else _reply_words_rule(f"use {thing}")


def _did_you(m: re.Match) -> str | None:
    verb, thing = m.group("v").lower(), _tidy(m.group("x"))
    if not thing:
        return None
    return _sentence(f"{verb} {thing} first")


def _fixed(text: str) -> Rewrite:
    return lambda m: text


# Words the user wants in the reply, said as a rule about the reply (the opening rule's form): SmolLM2-135M-Instruct
# told 'Use the word "therefore" before the answer.' was pleased 0.29 (24 training problems, one sample each at
# temperature 0.6, the therefore persona's rating), told 'Your reply must use the word "therefore" before the
# answer.' 0.46. Only for quoted words after use / say / include / mention: "use pytest" or "say hi to Ana" are
# about the task, not the reply's wording.
_REPLY_WORDS = re.compile(r'^(?:use|say|include|mention)\s+(?:the\s+(?:words?|phrase|term)\s+)?"[^"]+"', re.IGNORECASE)


def _imperative(m: re.Match) -> str | None:
    """The captured words with their first verb in the base form ("said hi first" -> "Say hi first.")."""
    words = _tidy(m.group("x")).split()
    if not words:
        return None
    words[0] = _base_form(words[0])
    return _reply_words_rule(" ".join(words))


def _reply_words_rule(text: str) -> str:
    """'use the word "X" ...' -> 'Your reply must use the word "X" ...'; anything else as a sentence."""
    if _REPLY_WORDS.match(text):
        return _sentence(f"Your reply must {text[0].lower()}{text[1:]}")
    return _sentence(text)


# Style corrections: how the reply came across ("a bit rude", "too cold", "not very encouraging").
_END_CLAUSE = r"\s*(?=$|[.!?;,:\n]|\s(?:please|pls|thanks|thank you|instead|anymore)\b)"  # _END, also at ":"
_WORDS = r'(?:"[^"\n]{0,100}"|[^.!?;,:\n"])'  # a clause's characters; a quotation may hold commas ("Best, Ana")
_GOOD = (r"encouraging|friendly|kind|warm|polite|supportive|positive|patient|empathetic|respectful|helpful|useful"
         r"|clear|concise|specific|precise|accurate|detailed|thorough|natural|human|personal|engaging|readable"
         r"|informative|professional|convincing|welcoming|gentle|motivating|constructive|nice|funny|casual|simple"
         r"|direct")
_TEXT_QUALITIES = {"useful", "detailed", "natural", "human", "personal", "engaging", "readable", "informative",
                   "convincing", "motivating", "simple"}  # "Make it more ..." rather than "Be more ..."
# judgements of a reply; "very formal", "so negative" also describe what a new request wants, the harsh ones do not
_HARSH_SET = set("""rude impolite harsh blunt curt abrupt condescending patronizing patronising dismissive preachy pushy
snarky sarcastic robotic cringey cringy cringe cheesy salesy unfriendly bossy aggressive impersonal""".split())
_BAD_SET = _HARSH_SET | set("""cold dry stiff mechanical mean negative discouraging generic bland boring repetitive
confusing messy cluttered awkward fake unclear vague wordy verbose formal technical""".split())
_ROBOTIC = "Make it sound less robotic and more natural."
_AI_TEXT = "Make it read less like AI-written text."
_BRIEFER = "Answer much more briefly, with only the essentials."
_FULLER = "Give a more detailed, complete answer."
_SIMPLER = "Explain it more simply, without jargon."
_REMEDY = {  # a quality the user objects to -> what to do instead
    "cold": "Use a warmer tone.", "rude": "Be more polite.", "impolite": "Be more polite.", "harsh": "Be gentler.",
    "blunt": "Be gentler and less blunt.", "curt": "Be less curt.", "abrupt": "Be less abrupt.",
    "dry": "Make it more engaging.", "boring": "Make it more engaging.", "bland": "Make it more engaging.",
    "stiff": "Make it sound more natural.", "robotic": _ROBOTIC, "mechanical": _ROBOTIC,
    "condescending": "Do not be condescending.", "patronizing": "Do not be patronizing.",
    "patronising": "Do not be patronising.", "mean": "Be kinder.", "dismissive": "Do not be dismissive.",
    "negative": "Be more encouraging.", "discouraging": "Be more encouraging.", "unfriendly": "Be friendlier.",
    "impersonal": "Make it more personal.", "generic": "Be more specific.", "repetitive": "Do not repeat yourself.",
    "confusing": "Explain it more clearly.", "unclear": "Explain it more clearly.",
    "messy": "Make it cleaner and better organized.", "cluttered": "Make it cleaner and better organized.",
    "cheesy": "Make it less cheesy.", "cringe": "Make it less cringey.", "cringy": "Make it less cringey.",
    "wordy": _BRIEFER, "verbose": _BRIEFER, "long": _BRIEFER, "lengthy": _BRIEFER, "short": _FULLER,
    "brief": _FULLER, "terse": _FULLER, "vague": _FULLER, "complicated": _SIMPLER, "complex": _SIMPLER,
    "technical": _SIMPLER, "advanced": _SIMPLER, "dense": _SIMPLER,
    "hard": "Make it easier.", "difficult": "Make it easier.", "easy": "Make it harder.", "slow": "Make it faster.",
    "fast": "Make it slower.", "big": "Make it smaller.", "large": "Make it smaller.", "small": "Make it bigger.",
    "expensive": "Make it cheaper.", "loud": "Make it quieter.", "high": "Make it lower.", "low": "Make it higher.",
}
_TONE_SET = set(_TONES.split("|"))
# "too <word>" that another rule rewrites ("too long") or that is no complaint ("me too", "too bad", "too late")
_NOT_JUDGED_TOO = set("""long short brief terse verbose wordy lengthy vague complicated complex technical advanced
confusing dense much many few little late early soon bad good kind great cool cute funny sweet nice awesome perfect far
close often well lazy tired busy sleepy hungry excited happy sad old young and or but so then i we you he she they it
its that this these those the a an my your our his her their please pls thanks thank lol lmao haha btw now is was are
were be been though tbh maybe ok okay also as if when for with to in on at of by from right yes no not sure will can
could would should do does did have has had am""".split()) | _TONE_SET
# "is it too late to plant tomatoes?" asks and "pretty cold today" talks about the weather: neither complains
_NOT_ABOUT_REPLY = re.compile(r"[^.!?,\n]{0,60}\?|\s+(?:today|tonight|outside|out there|in here|lately"
                              r"|this (?:morning|week))\b", re.I)
_NOT_ABOUT_REPLY_TOO = re.compile(_NOT_ABOUT_REPLY.pattern + r"|[^.!?\n]{0,80}\?|\s+to\s", re.I)
_INTENSIFIERS = (r"way too|far too|much too|too|overly|a bit|a little|a tad|kind of|kinda|sort of|pretty|rather|quite"
                 r"|really|so|very|super")
_PLAIN_INTENSIFIERS = {"really", "so", "very", "super", "quite", "rather"}  # "a very formal email" is a request


def _ai_style(m: re.Match) -> str:
    said = m.group(0).lower()
    return _ROBOTIC if re.search(r"\b(?:robot|robotic|bot|machine)", said) else _AI_TEXT


def _judged(m: re.Match) -> str | None:
    """"too cold" -> "Use a warmer tone.", "a bit rude" -> "Be more polite.", "too salty" -> "Make it less salty."."""
    pre = (m.group("pre") or m.group("pre2") or "").lower()
    adjective, lower = m.group("adj"), m.group("adj").lower()
    too = pre in {"too", "way too", "far too", "much too"}
    # "too shy to speak in class, any tips?" is about the user's world, not the reply
    guard = _NOT_ABOUT_REPLY_TOO if too else _NOT_ABOUT_REPLY
    if guard.match(m.string, m.end()):
        return None
    if re.match(rf"(?:{AI_WORDS})\b", lower):
        return _AI_TEXT
    if too:
        if lower in _NOT_JUDGED_TOO:
            return None
    elif lower not in (_HARSH_SET if pre in _PLAIN_INTENSIFIERS and not m.group("subject") else _BAD_SET):
        return None
    if lower in _REMEDY:
        return _REMEDY[lower]
    if lower in _TONE_SET:
        return f"Use a less {lower} tone."
    return _sentence(f"Make it less {adjective}")


_MORE = {"friendlier": "Be friendlier.", "warmer": "Use a warmer tone.", "kinder": "Be kinder.", "nicer": "Be nicer.",
         "clearer": "Be clearer.", "gentler": "Be gentler.", "softer": "Be gentler.", "simpler": _SIMPLER}
_PLAIN_COMPARATIVE = {"friendly": "friendlier", "warm": "warmer", "kind": "kinder", "nice": "nicer", "clear": "clearer",
                      "gentle": "gentler", "simple": "simpler"}


def _not_very(m: re.Match) -> str | None:
    """"not very encouraging" -> "Be more encouraging.", "could be friendlier" -> "Be friendlier."."""
    better = (m.group("better") or "").lower()
    if better:
        return _MORE.get(better)
    adjective = next(a for a in (m.group("adj"), m.group("adj2"), m.group("adj3"), m.group("adj4")) if a).lower()
    if adjective in _PLAIN_COMPARATIVE:
        return _MORE[_PLAIN_COMPARATIVE[adjective]]
    if adjective in _TEXT_QUALITIES:
        return f"Make it more {adjective}."
    return f"Be more {adjective}."


def _too_much_of(m: re.Match) -> str | None:
    """"too many emojis" -> "Use fewer emojis."."""
    if _NOT_ABOUT_REPLY_TOO.match(m.string, m.end()):
        return None
    thing = _tidy(m.group("x"))
    if not thing:
        return None
    return _sentence(f"Use {'less' if m.group('q').lower() == 'much' else 'fewer'} {thing}")


_STYLE_NOUN = re.compile(
    r"\b(?:bold|bolding|bullets?|bullet ?points?|lists?|headings?|headers?|titles?|emojis?|emoticons|markdown|tables?"
    r"|code ?blocks?|intro|introduction|preamble|fluff|filler|caveats?|disclaimers?|labels?|numbering|asterisks"
    r"|hashtags|exclamation (?:marks?|points?)|formatting|italics?|caps|capitals|apolog(?:y|ies)|em[- ]?dash(?:es)?"
    r"|dashes|semicolons|quotes|links|sign-?offs?|signatures?|summary|summaries|conclusion|recap|slang|abbreviations"
    r"|buzzwords|swearing|profanity|latex|html|symbols)\b", re.I)
_NOT_FORBIDDING = (r"(?:i|i'm|you|we|it|it's|that|this|the|not|no|problem|problems|worries|worry|rush|idea|way"
                   r"|doubt|thanks|thank|need|pressure|hurry|prob|biggie|matter|one|wait|sorry|lol|haha|ok|okay"
                   r"|just|actually|but|and|more|longer|offense|offence|clue|luck|kidding|joke|reason|point|change"
                   r"|difference|hello|hi|hey|greetings?|jargon)(?![\w-])")
_LIST_SPLIT = re.compile(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", re.I)


def _no_list(m: re.Match) -> str | None:
    """"no bold, no lists and no final answer label" -> "Do not use bold, lists or final answer label."."""
    if m.string[m.end():].lstrip().startswith("?"):
        return None  # "no summary?" misses the summary: it forbids nothing (the rest of the message may say more)
    parts = [p.strip() for p in _LIST_SPLIT.split(m.group("x")) if p.strip()]
    forbidden = sum(1 for p in parts if p.lower().startswith("no "))
    items = [_tidy(re.sub(r"^no\s+", "", p, flags=re.I)) for p in parts]
    items = [i for i in items if i]
    if not items or (forbidden < 2 and not _STYLE_NOUN.search(items[0])):
        return None  # one "no X" only counts for formatting ("no emojis"), not "no Paris"
    listed = items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"
    instead = _tidy(m.group("y") or "")
    return _sentence(f"Do not use {listed}; use only {instead}" if instead else f"Do not use {listed}")


# (group, rule name, pattern, rewrite); earlier rules win where matches overlap and within a group.
_R = re.IGNORECASE
_RULES: list[tuple[str, str, re.Pattern, Rewrite]] = [
    ("length", "length_limit", re.compile(
        r"\b(?:in|as|to|with|into|under|max(?:imum)?|at most|no more than|less than|fewer than|keep it (?:to|under)"
        r"|just|only|a|one|1|single)\s+(?:(?:just|only|a|one|1|single|short)\s+)*(?P<n>\d+\s+)?"
        r"(?P<unit>sentences?|lines?|words?|paragraphs?|bullet points|characters)\b", _R), _length_limit),
    # how the reply came across: "looks way too AI-written", "sounds like a robot", "no hello?"
    ("ai", "ai_style", re.compile(
        r"\b(?:looks?|sounds?|reads?|feels?|seems?)\s+(?:(?:way|so|very|too|really|obviously|clearly|pretty|super"
        r"|totally|completely|kinda|kind of|a bit|a little)\s+)*(?:like\s+)?(?:(?:it was|it's)\s+)?"
        rf"(?:(?:written|generated|made)\s+by\s+)?(?:an?\s+)?(?:{AI_WORDS}|bot|robot)"
        r"(?:[- ](?:written|generated|made|ish|like|y|sounding))?\b(?!\s+(?:is|are|was|will|can|could|would|might"
        r"|has|have)\b)"
        r"|\b(?:know|tell|see|obvious|clear|notice|guess|spot)\w*\s+(?:that\s+)?(?:this|it)(?:'s|\s+is|\s+was)\s+"
        rf"(?:(?:written|generated|made)\s+by\s+)?(?:an?\s+)?(?:{AI_WORDS}|bot|robot)\b"
        rf"|\b(?:too|so|very|obviously|clearly|totally|super)\s+(?:{AI_WORDS}|robotic|bot-?like|machine-?like)"
        r"(?:[- ](?:written|generated|made|ish|like|y|sounding))?\b", _R), _ai_style),
    ("greet", "greeting", re.compile(
        r"\bno\s+(?:hello|hi|hey|greeting|greetings|good morning|salutation)\b"
        r"|\b(?:didn't|did not|never)\s+(?:even\s+)?(?:say|said|greet|greeted)\s+(?:hi|hello|hey|me)\b"
        r"|\bwithout\s+(?:a\s+|any\s+)?(?:greeting|hello|hi)\b", _R), _fixed(f"Your reply must start with a greeting such as {GREETING_EXAMPLE}.")),
    # how to write the next reply: "start your reply with a greeting", "write it in plain sentences", "be friendlier"
    ("be", "be_more", re.compile(
        _START + r"(?:please\s+|just\s+|try to\s+|try and\s+|always\s+)?(?P<x>be\s+(?:a (?:bit|little|lot)\s+"
        rf"|much\s+|way\s+|even\s+|slightly\s+)?(?:more|less|{_GOOD}|friendlier|warmer|kinder|nicer|clearer"
        r"|gentler|brief|honest|short|quick|careful)\b" + _WORDS + "*?)" + _END_CLAUSE, _R), _as_instruction),
    ("start", "start_with", re.compile(
        _START + r"(?:please\s+|always\s+)?(?P<x>(?:start|begin|open|lead|end|finish|close|sign off)\s+"
        r"(?:(?:your|the|each|every)\s+(?:[\w'-]+\s+){0,2}?)?(?:with|by)\s+" + _WORDS + "+?)" + _END_CLAUSE, _R),
     _as_instruction),
    ("write", "write_it", re.compile(
        _START + r"(?:please\s+|can you\s+|could you\s+|just\s+)?(?P<x>(?:re)?write\s+(?:it|this|that|them"
        r"|the\s+(?:[\w'-]+\s+)?(?:answer|reply|response|text|email|message|comments?|feedback|letter|essay|post"
        r"|summary|story|note))\s+(?:in|like|without|with|as|using|more|less|so)\b[^.!?;\n]*?"
        r"|make\s+(?:it|this|that|them)\s+(?:sound|read|look|feel|seem)\b[^.!?;\n]*?)" + _END_SENTENCE, _R),
     _as_instruction),
    ("at_least", "at_least", re.compile(
        r"\byou\s+(?:could|can|might|should)(?:'ve|\s+have)?\s+at\s+(?:the\s+very\s+)?least\s+(?:have\s+)?"
        + _UPTO + _END, _R), _imperative),
    ("not_very", "not_very", re.compile(
        r"\b(?:not|isn't|wasn't|aren't|weren't|(?:doesn't|don't|didn't) (?:sound|read|look|feel|seem))\s+"
        r"(?:very|that|so|really|particularly|super|exactly|all that|overly|terribly|especially|too)\s+"
        rf"(?P<adj>{_GOOD})\b"
        rf"|\bnot\s+(?P<adj2>{_GOOD})\s+(?:at all|enough)\b"
        rf"|\b(?:that's|this is|it's|you're|you are|that was|this was|it was|you were)\s+not\s+(?P<adj3>{_GOOD})\b"
        r"|\b(?:could|should|needs? to|has to|might)\s+(?:be|sound|read)\s+(?:a (?:bit|little|lot)\s+|much\s+"
        rf"|way\s+|even\s+|slightly\s+)?(?:more\s+(?P<adj4>{_GOOD})|(?P<better>friendlier|warmer|kinder|nicer"
        r"|clearer|gentler|softer|simpler))\b", _R), _not_very),
    ("keep", "keep_it", re.compile(
        _START + r"(?:please\s+|just\s+)?(?P<x>keep\s+(?:it|this|that|them|(?:the|your)\s+(?:answers?|repl(?:y|ies)"
        r"|responses?|messages?|comments?|feedback|text|email|tone))\s+(?:to|under|below|within|simple"
        r"|simpler|brief|concise|casual|light|plain|friendly|friendlier|professional|positive|tight|focused|clean"
        r"|on topic|warm|polite|neutral|real|human|natural)\b[^.!?;,\n]*?)" + _END, _R), _as_instruction),
    ("dont", "stop", re.compile(_START + r"(?:please\s+)?(?:stop|quit|no more)\s+(?P<verb>\w+ing)\b\s*"
                                + _UPTO_MAYBE + _END, _R), _stop),
    ("dont", "dont", re.compile(_START + r"(?:you\s+)?(?:please\s+)?(?:don't|dont|do not|never|pls don't)\s+"
                                r"(?P<verb>[a-z]+)\b\s*" + _UPTO_MAYBE + _END, _R), _dont),
    ("dont", "avoid", re.compile(_START + r"(?:please\s+)?(?:avoid|no more|without(?: the| any)?|skip the|lose the"
                                 r"|drop the|get rid of(?: the)?)\s+" + _UPTO + _END, _R), _avoid),
    ("dont", "dislike", re.compile(r"\bI\s+(?:don't|do not|didn't|did not)\s+(?:want|need|like|ask for)\s+"
                                   + _UPTO + _END, _R), _dislike),
    ("nolist", "no_list", re.compile(
        _START + rf"(?:just\s+)?(?P<x>no\s+(?!{_NOT_FORBIDDING})[^.!?;,\n]+(?:,\s*(?:and\s+|or\s+)?no\s+"
        r"[^.!?;,\n]+)*)(?:,\s*(?:just|only|but|instead)\s+(?P<y>[^.!?;,\n]+))?", _R), _no_list),
    ("should", "should_have", re.compile(
        r"\byou\s+(?:really\s+)?(?:should(?:'ve| have)?|shoulda|(?P<neg0>shouldn't|should not)(?:'ve| have)?"
        r"|could(?:'ve| have)|ought to(?: have)?|need(?:ed)? to|were supposed to|have to|must(?: have)?)\s+"
        r"(?P<neg1>not\s+|never\s+)?(?:have\s+)?(?P<neg>not\s+|never\s+)?(?:just\s+)?"
        + _UPTO_SENTENCE + _END_SENTENCE, _R), _should_have),
    ("should", "next_time", re.compile(r"(?:\b(?:next time|in future|in the future|from now on|going forward)[,:]?\s+"
                                       r"(?!(?:I|I'm|I'll|we|we're|we'll|then)\b)|"
                                       + _START + r"(?:make sure (?:to|you)|remember to|be sure to)\s+)"
                                       + _UPTO_SENTENCE + _END_SENTENCE, _R), _as_instruction),
    ("should", "always", re.compile(_START + r"(?:please\s+)?(?P<x>always\s+[^.!?;\n]+?)" + _END_SENTENCE, _R),
     _as_instruction),
    ("should", "did_you", re.compile(r"\bdid you (?:even |actually |not )?(?P<v>check|test|read|try|run|look at|verify"
                                     r"|open|search|consider)\s+" + _UPTO + r"\s*\?", _R), _did_you),
    ("forgot", "forgot", re.compile(r"\byou\s+(?:forgot|missed|left out|skipped|omitted|didn't include|did not include"
                                    r"|didn't mention|did not mention)\s+(?:about\s+)?(?P<to>to\s+)?" + _UPTO_SENTENCE
                                    + _END_SENTENCE, _R), _forgot),
    ("forgot", "you_didnt", re.compile(r"\byou\s+(?:didn't|did not|never)\s+(?P<x>(?:read|use|check|follow|answer|test"
                                       r"|run|open|look at|consider|save|update|reply to|address)\b[^.!?;\n]*?)"
                                       + _END_SENTENCE, _R), _as_instruction),
    ("meant", "not_but", re.compile(_START + r"(?:no[,.!]?\s+)?not\s+(?P<a>[^,.!?;\n]+?),\s*(?:but\s+|I meant\s+)?"
                                    + _UPTO_SENTENCE + _END_SENTENCE, _R), _not_but),
    ("meant", "meant", re.compile(r"\bI\s+(?P<verb>meant(?! to\b)|mean(?! to\b)|was asking about"
                                  r"|was talking about|was referring to|wanted|asked for|said)\s+"
                                  + _UPTO_SENTENCE + _END_SENTENCE, _R), _meant),
    ("meant", "should_be", re.compile(r"\b(?:it|that|this|the (?:answer|result|total|date|name|value|number|time|city"
                                      r"|price|capital))(?:'s| is| was)?\s+(?:should\s+(?:be|have\s+been)|is actually"
                                      r"|was actually|supposed to be)\s+" + _UPTO
                                      + r"(?:,?\s+not\s+(?P<y>[^.!?;,\n]+?))?" + _END, _R), _should_be),
    ("meant", "actually", re.compile(r"(?:^|[.!?]\s+)(?:no[,.!]?\s+|well[,]?\s+)?actually[,]?\s+" + _UPTO_SENTENCE
                                     + _END_SENTENCE, _R), _actually),
    ("language", "language", re.compile(
        # "translate this to German: ..." is a new task, not a correction
        rf"(?<!translate )(?<!translate it )(?<!translate this )\b(?:in|into|to|speak|use)\s+(?P<lang>{_LANGUAGES})\b"
        rf"|\b(?P<lang2>{_LANGUAGES})\s+please\b", _R),
     _language),
    ("units", "units", re.compile(r"\b(?:use|in|into|to|with|switch to)\s+(?:the\s+)?(?P<u>metric|imperial|celsius"
                                  r"|fahrenheit|si|us|24-hour|24h|12-hour|12h|kilometers|kilometres|miles|kg"
                                  r"|kilograms|pounds|meters|metres|feet|liters|litres|gallons)"
                                  r"(?:\s+(?:units|system|time|format|clock|degrees))?\b", _R), _units),
    ("tone", "tone", re.compile(rf"\b(?P<dir>more|less|too|so|way too|overly)\s+(?P<adj>{_TONES})\b", _R), _tone),
    ("quality", "quality", re.compile(
        rf"\b(?:be|more|make it|be a bit|a bit more)\s+(?:more\s+)?(?P<adj>{_QUALITIES})\b", _R), _quality),
    ("length", "too_long", re.compile(
        r"\btoo\s+(?:long|verbose|wordy|lengthy|much text)\b|\bshorter\b|\bshorten\b|\bbriefer\b"
        r"|\bbe (?:brief|concise)\b|\bmore concise\b|\btl;?dr\b|\bless (?:text|words|verbose|wordy)\b"
        r"|\bcut it down\b|\bkeep it short\b"
        r"|\bget to the point\b|\bway too much\b|\bwall of text\b", _R),
     _fixed("Answer much more briefly, with only the essentials.")),
    ("length", "too_short", re.compile(
        r"\btoo\s+(?:short|brief|terse|vague)\b|\bmore (?:detail(?:s|ed)?|depth|thorough|in-depth)\b|\belaborate\b"
        r"|\bexpand on\b|\b(?:make it|a bit|much) longer\b|\blonger,? please\b"
        r"|\bexplain (?:more|further|in more detail)\b|\bgo into (?:more )?detail\b", _R),
     _fixed("Give a more detailed, complete answer.")),
    ("simpler", "simpler", re.compile(
        r"\btoo\s+(?:complicated|complex|technical|advanced|confusing|dense)\b|\bsimpler\b|\bsimplify\b"
        r"|\b(?:plain|simple) (?:english|language|terms|words)\b|\blike I'?m (?:five|5|a beginner|new)\b|\beli5\b"
        r"|\bless (?:technical|jargon)\b|\b(?:no|without) jargon\b", _R), _fixed(_SIMPLER)),
    ("format", "format", re.compile(
        r"\b(?:as|in|into|use|with|using)\s+(?:an?\s+|the\s+)?(?P<f>table|bulleted list|bullet list|bullet points?"
        r"|numbered list|list|code block|json|yaml|csv|markdown|plain text|prose|paragraphs?)\b(?!\s+(?:of|about|for))",
        _R), _format),
    # corrections that are only judgements: "too cold", "a bit rude", "not very encouraging", "too many emojis"
    ("judged", "too_adj", re.compile(
        r"(?<!\bme )(?<!\byou )(?<!\bnot )(?<!\bnone )(?<!\bi'm )(?<!\bi am )"
        rf"\b(?:(?P<subject>that's|that was|you're|you are|you were|how|sounds|seems|feels|comes across as"
        rf"|came across as|{REPLY_IS})\s+(?:being\s+)?(?:(?P<pre>{_INTENSIFIERS})\s+){{0,3}}"
        rf"|(?:(?P<pre2>{_INTENSIFIERS})\s+){{1,3}})"
        r"(?P<adj>[a-z]+(?:-[a-z]+)*)\b", _R), _judged),
    ("amount", "too_much_of", re.compile(
        r"\btoo\s+(?P<q>much|many)\s+(?!(?:for|to|of|in|on|at|the|a|an|and|or|but|time|already|now|here|there|i"
        r"|you|it|that|this)\b)" + _UPTO + _END, _R), _too_much_of),
    # a plain imperative ("say what they got right", "mention the units") only in a message that corrects
    ("imperative", "imperative", re.compile(
        _START + r"(?:please\s+|also\s+|and\s+)*(?P<x>(?:say|mention|name|give|tell|state|show|list|include|explain"
        r"|acknowledge|point out|note|greet|address|praise|thank|put|add|remove|drop|cut|focus on|talk about"
        r"|refer to|call|ask|answer|reply|respond|check|avoid|skip|leave out|compare|quote|cite|spell out|round"
        r"|double-check|verify|stick to|highlight|emphasi[sz]e|split|break|sort|group|label|offer|suggest|write"
        r"|make|keep|use(?![^.!?;,\n]{0,100}\binstead\b))\b" + _WORDS + "*?)" + _END_CLAUSE, _R), _as_instruction),
    ("add", "add", re.compile(_START + r"(?:can you |could you |would you )?(?:please\s+)?(?:also\s+)?"
                              r"(?:add|include|give(?: me)?|show(?: me)?|provide|cite|mention)\s+"
                              rf"(?P<x>(?:an?|some|the|more|your|a few|\d+|at least \w+)?\s*(?:\w+\s+)?(?:{_ADDABLE})\b"
                              r"[^.!?;,\n]*?)" + _END, _R), _add),
    ("use", "use_instead", re.compile(r"\b(?:use|try|switch to|go with|pick|choose)\s+" + _UPTO
                                      + r"\s+(?P<instead>instead)(?:\s+of\s+(?P<y>[^.!?;,\n]+?))?" + _END, _R), _use),
]
# "use X" as a whole short message ("use pnpm", "use the staging server please")
_SHORT_USE = re.compile(r"^(?:please\s+|just\s+|no[,.!]?\s+)?use\s+(?P<x>[^.!?;,\n]+?)(?P<instead>)\s*[.!]*$", _R)


_TRACEBACK = "Traceback (most recent call last)"
# "give me the code", "tell me a joke" are requests; after "too cold." they are instructions
_ONLY_IN_CORRECTIONS = {"imperative"}
# judgements ("too cold") give way to explicit instructions ("be friendly") when there are too many to keep
_JUDGEMENTS = {"ai_style", "too_adj", "not_very"}


def _rewrites(text: str) -> list[HintMatch]:
    taken: list[tuple[int, int]] = []
    groups: set[str] = set()
    found: list[tuple[int, HintMatch]] = []
    if _TRACEBACK in text:  # a pasted traceback: its last exception line says what went wrong
        start = text.index(_TRACEBACK)
        line = error_line(text[start:])
        if line:
            taken.append((start, len(text)))
            found.append((start, HintMatch(f"Running it failed with: {line.rstrip('.')}.", "user_error", line)))
    # corrections are short; a long reply is pasted material, and the patterns are not linear in length
    text = text[:MAX_SCAN]
    corrective = None  # whether the reply corrects at all: plain imperatives count only then
    for group, name, pattern, rewrite in _RULES:
        if group in groups:
            continue
        if group in _ONLY_IN_CORRECTIONS:
            if corrective is None:
                corrective = classify_user_text(text).score < 0
            if not corrective:
                continue
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(start < b and a < end for a, b in taken):
                continue
            if group in _ONLY_IN_CORRECTIONS and any((said := other.search(match.group(0))) and again(said)
                                                     for g, _, other, again in _RULES if g in groups):
                continue  # "explain like I'm five" after "too complicated" restates what a rule already said
            hint = rewrite(match)
            if not hint:
                continue
            taken.append((start, end))
            groups.add(group)
            found.append((start, HintMatch(hint, name, match.group(0).strip())))
            break
    if not found and len(text.split()) <= 8:
        match = _SHORT_USE.match(text)
        if match and (hint := _use(match)):
            found.append((0, HintMatch(hint, "use", match.group(0).strip())))
    found.sort(key=lambda item: item[0])
    unique: list[HintMatch] = []
    for _, match in found:
        if match.hint not in {m.hint for m in unique}:
            unique.append(match)
    # "Be gentler." says less than "Be gentler with the junior dev." from the same reply
    return [m for m in unique if not any(o.hint != m.hint and o.hint.startswith(m.hint.rstrip(".") + " ")
                                         for o in unique)]


# Words that say "wrong" / "again" without saying what to do differently.
_EMPTY_WORDS = set("""no nope nah wrong that that's thats is it it's its this not right correct again try please pls
redo retry incorrect fix still broken doesn't does work works working you your you're the a an answer one more time do
did ugh hmm oh come on seriously totally completely all just really very but thanks ok okay what why was wasn't isn't
even at so bad terrible awful useless nonsense sense makes make same thing result output response reply again! wow
still same error failed fails failing didn't help helpful unhelpful quite exactly what i asked for meant want wanted
""".split())


def _has_content(text: str, known: str = "") -> bool:
    """Whether `text` says at least two things beyond "wrong, again" (and beyond the words of `known`)."""
    empty = _EMPTY_WORDS | set(re.findall(r"[a-z0-9']+", known.lower()))
    return sum(1 for word in re.findall(r"[a-z0-9']+", text.lower()) if word not in empty) >= 2


def user_feedback_hint(text: str, request: str = "") -> tuple[HintMatch | None, str]:
    """The hint in one user reply, and the reason when there is none."""
    text = clean_user_text(text).replace("\u2019", "'").replace("\u2018", "'")
    if not text:
        return None, "empty reply"
    rewrites = _rewrites(text)
    if rewrites:
        kept = list(rewrites)
        while len(kept) > MAX_INSTRUCTIONS and any(m.rule in _JUDGEMENTS for m in kept):
            kept.remove(next(m for m in kept if m.rule in _JUDGEMENTS))
        kept = kept[:MAX_INSTRUCTIONS]
        return HintMatch(" ".join(m.hint for m in kept), "+".join(m.rule for m in kept),
                         " | ".join(m.phrase for m in kept)), ""
    scan = text[:MAX_SCAN]  # classify_user_text is slow on very long unbroken text
    verdict = classify_user_text(scan)
    repeat = repeated_request(request, scan) if request else None
    if verdict.score < 0 or repeat is not None:
        # a plain repeat of the request says "missed" but nothing new: it must add words of its own
        if not _has_content(text, request if verdict.score >= 0 else ""):
            return None, f"correction without content ({verdict.describe() if verdict.score < 0 else 'repeat'})"
        quoted = _clip(text) if len(text) > MAX_QUOTE else " ".join(text.split())
        if repeat is not None and verdict.score >= 0:
            return HintMatch(f'The previous answer missed the request; address it directly: "{quoted}"',
                             "repeated_request", quoted), ""
        return HintMatch(f'Follow the user\'s correction: "{quoted}"', "verbatim", verdict.phrase), ""
    if verdict.score > 0:
        return None, f"positive feedback ({verdict.describe()})"
    return None, "no corrective feedback"


def rules_hint(next_state: Sequence[dict], request: str = "",
               response_message: dict | None = None) -> tuple[HintMatch | None, str]:
    """The rules' hint for a next state (user corrections first, then a tool error), or the reason for none."""
    user_text = last_user_text(next_state)
    user, reason = user_feedback_hint(user_text, request) if user_text is not None else (None, "no user reply")
    tool = tool_error_hint(next_state, response_message)
    parts = [p for p in (user, tool) if p is not None]
    if not parts:
        return None, reason if user_text is not None else "no user reply and no tool error"
    if len(parts) == 1:
        return parts[0], ""
    # both: the user's words first; the tool error only if there is room for another sentence
    if user.hint.count(". ") + 1 >= MAX_INSTRUCTIONS:
        return user, ""
    return HintMatch(f"{user.hint} {tool.hint}", f"{user.rule}+{tool.rule}", f"{user.phrase} | {tool.phrase}"), ""


class RulesHintJudge:
    name = "rules"

    def __init__(self):
        self.stats = {"calls": 0, "accepted": 0}

    async def hint(self, turn: TurnForJudge) -> HintResult:
        self.stats["calls"] += 1
        started = time.monotonic()
        next_state = [m for m in turn.next_state if not is_internal_context(m)]
        match, reason = rules_hint(next_state, last_user_request(turn.prompt_messages), turn.response_message)
        seconds = time.monotonic() - started
        if match is None:
            vote = Vote(score=-1, rationale=f"no hint: {reason}", source=self.name, seconds=seconds)
            return HintResult(accepted=False, hint="", votes=[vote], judge=self.name, extras={"reason": reason})
        self.stats["accepted"] += 1
        vote = Vote(score=1, rationale=match.describe(), source=self.name, seconds=seconds)
        return HintResult(accepted=True, hint=match.hint, votes=[vote], judge=self.name,
                          extras={"rule": match.rule, "phrase": match.phrase})

    async def aclose(self) -> None:
        return None
