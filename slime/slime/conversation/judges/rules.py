"""A CPU judge that reads only explicit feedback in the next state: tool errors, corrections, thanks.

It scores +1 / -1 only when the next state says so in recognisable words and stays neutral (0) otherwise,
so it is cheap, explainable and safe to put first in a cascade. Precedence, from the upstream PRM rules:
a correction or error beats praise ("thanks, but that's wrong" is negative), and a tool that returned a
normal result means the action worked.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from slime.conversation.judges.base import Judgement, TurnForJudge, Vote
from slime.conversation.judges.prompts import last_user_request
from slime.conversation.openclaw_conventions import clean_user_text, is_internal_context, message_text

__all__ = [
    "AI_WORDS",
    "REPLY_IS",
    "RuleMatch",
    "RulesJudge",
    "classify_tool_result",
    "classify_tool_results",
    "classify_user_text",
    "combine_signals",
    "last_user_text",
    "repeated_request",
    "rules_verdict",
]


@dataclass(frozen=True)
class RuleMatch:
    score: int  # +1, -1 or 0
    rule: str  # which rule decided, e.g. "tool_error", "user_negative:try_again", "no_signal"
    phrase: str = ""  # the text that matched

    def describe(self) -> str:
        return f"{self.rule}: {self.phrase!r}" if self.phrase else self.rule


def _alternatives(*rules: tuple[str, ...], flags: int = re.IGNORECASE) -> list[tuple[str, re.Pattern]]:
    """(name, pattern, pattern, ...) rows compiled to (name, one alternation)."""
    return [(name, re.compile("|".join(patterns), flags)) for name, *patterns in rules]


# ---------------------------------------------------------------------------------------------------
# Tool results
# ---------------------------------------------------------------------------------------------------

# Tool output is often a file or a listing that merely mentions errors (`read` of source code with
# "except Exception:" or "error: str = ''"), so the weaker signs only count where a failing command puts
# them: at the start of an unindented line, or in the usual "failed to ..." / "... failed" shapes.
_TOOL_ERRORS = _alternatives(
    ("traceback", r"Traceback \(most recent call last\)"),
    ("error_label", r"^(?:[\w./-]+:\s)?(?:[\w.]*error|fatal|panic)\s*:",  # "error: ...", "ValueError: ..."
     r"^npm (?:error|err!)"),
    ("error_field", r"\"error\"\s*:(?!\s*(?:null\b|false\b|\"\"|\[\]|\{\}))",  # JSON {"error": "..."}
     r"\"status\"\s*:\s*\"(?:error|failed|failure)\""),
    ("exception", r"^[\w.$]*Exception\b(?!\s*[,)])", r"\b[\w.$]*Exception\s+at\s",
     r"\b(?:unhandled|uncaught) exception\b", r"^Exception in thread\b"),
    ("command_not_found", r"command not found", r"is not recognized as an internal or external command"),
    ("no_such_file", r"no such file(?: or directory)?"),
    ("nonzero_exit", r"\bexit(?:ed)?(?: with)? (?:code|status)\s*[:=]?\s*-?[1-9]\d*\b"),
    ("permission_denied", r"permission denied", r"access denied", r"operation not permitted"),
    # "0 failed" in a test summary is a success; "# retry failed requests" in a file is no failure
    ("failed", r"(?<!\b0 )\b(?:failed|failure)\s*(?:[:!.]|$)", r"\bfailed (?:to|with)\b", r"^FAILED\b"),
    ("segfault", r"segmentation fault", r"core dumped"),
    flags=re.IGNORECASE | re.MULTILINE,
)


def classify_tool_result(text: str) -> RuleMatch:
    """-1 when a tool's output reports an error, else +1: the action ran and produced its result."""
    for name, pattern in _TOOL_ERRORS:
        match = pattern.search(text)
        if match:
            return RuleMatch(-1, f"tool_error:{name}", match.group(0).strip())
    return RuleMatch(1, "tool_ok", text.strip()[:60])


def classify_tool_results(next_state: Sequence[dict]) -> RuleMatch | None:
    """Verdict over every tool message of the next state (any error wins); None when there is none."""
    verdicts = [classify_tool_result(message_text(m)) for m in next_state if m.get("role") == "tool"]
    if not verdicts:
        return None
    return next((v for v in verdicts if v.score < 0), verdicts[0])


# ---------------------------------------------------------------------------------------------------
# User feedback
# ---------------------------------------------------------------------------------------------------

_NEGATORS = r"(?:not|never|no longer|hardly)"  # for "not great", "never correct"
_PRAISE_WORDS = r"(?:great|good|perfect|correct|right|helpful)"

# Style corrections: how the reply came across ("a bit rude", "not very encouraging", "too AI-written") and
# how to write the next one ("start with a greeting", "be friendlier", "no bold, no lists").
_CLAUSE = r"(?:^|(?<=[.!?;:,\n])\s*|\b(?:but|and|so|also|just|please|pls|then|now|ok|okay)\s+)"  # clause start
_GOOD_QUALITIES = (r"(?:encouraging|friendly|kind|warm|polite|supportive|positive|patient|empathetic|respectful"
                   r"|helpful|useful|clear|concise|specific|precise|accurate|detailed|thorough|natural|human|personal"
                   r"|engaging|readable|informative|professional|convincing|welcoming|gentle|motivating|constructive"
                   r"|nice|funny|casual|simple|direct)")
_BETTER = (r"(?:friendlier|warmer|kinder|nicer|clearer|gentler|softer|simpler|shorter|briefer|funnier|livelier"
           r"|tighter|cleaner|easier|better)")
# judgements of a reply; "very formal", "so negative" also describe what a new request wants, the harsh ones do not
_HARSH_QUALITIES = (r"(?:rude|impolite|harsh|blunt|curt|abrupt|condescending|patroni[sz]ing|dismissive|preachy|pushy"
                    r"|snarky|sarcastic|robotic|cringey|cringy|cringe|cheesy|salesy|unfriendly|bossy|aggressive"
                    r"|impersonal)")
_BAD_QUALITIES = (rf"(?:{_HARSH_QUALITIES}|cold|dry|stiff|mechanical|mean|negative|discouraging|generic|bland|boring"
                  r"|repetitive|confusing|messy|cluttered|awkward|fake|unclear|vague|wordy|verbose|formal|technical)")
# "too <word>" that is no complaint about the reply: "me too", "too bad", "too late now", "too much" (own rule)
_NOT_JUDGED_TOO = (r"(?:much|many|few|little|late|early|soon|bad|good|kind|great|cool|cute|funny|sweet|nice|awesome"
                   r"|perfect|far|close|often|well|lazy|tired|busy|sleepy|hungry|excited|happy|sad|old|young|and|or"
                   r"|but|so|then|i|we|you|he|she|they|it|its|that|this|these|those|the|a|an|my|your|our|his|her"
                   r"|their|please|pls|thanks|thank|lol|lmao|haha|btw|now|is|was|are|were|be|been|though|tbh|maybe"
                   r"|ok|okay|also|as|if|when|for|with|to|in|on|at|of|by|from|right|yes|no|not|sure|will|can|could"
                   r"|would|should|do|does|did|have|has|had|am)")
# "is it too late to plant tomatoes?" asks and "pretty cold today" talks about the weather: neither complains
_QUESTION_AHEAD = (r"(?![^.!?,\n]{0,60}\?)"
                   r"(?!\s+(?:today|tonight|outside|out there|in here|lately|this (?:morning|week)))")
# ... and "too shy to speak in class, any tips?" is about the user's world, not about the reply
_QUESTION_AHEAD_TOO = _QUESTION_AHEAD + r"(?![^.!?\n]{0,80}\?)(?!\s+to\s)"
AI_WORDS = r"(?:ai|a\.i\.|chat ?gpt|gpt|llm)"
# what a judgement is about: "this reply is so generic", "the tone was kind of cold"
_REPLY_NOUN = (r"(?:answer|reply|response|email|text|message|code|feedback|comments?|tone|explanation|summary|letter"
               r"|essay|recipe|story|poem|wording|review|note|post|intro)")
REPLY_IS = (rf"(?:(?:this|that)(?:\s+{_REPLY_NOUN})?|(?:the|your)\s+{_REPLY_NOUN})\s+(?:is|was|feels|sounds|reads"
            r"|seems|looks)")
# things a reply can be told to leave out: "no bold", "no bullet points", "no final answer label"
_STYLE_NOUNS = (r"(?:bold|bolding|bullets?|bullet ?points?|lists?|headings?|headers?|titles?|emojis?|emoticons"
                r"|markdown|tables?|code ?blocks?|intro|introduction|preamble|fluff|filler|caveats?|disclaimers?"
                r"|labels?|numbering|asterisks|hashtags|exclamation (?:marks?|points?)|formatting|italics?|caps"
                r"|capitals|apolog(?:y|ies)|em[- ]?dash(?:es)?|dashes|semicolons|quotes|links|sign-?offs?"
                r"|signatures?|summary|summaries|conclusion|recap|slang|abbreviations|buzzwords|swearing|profanity"
                r"|latex|html|symbols)")
_NOT_FORBIDDING = (r"(?:i|i'm|you|we|it|it's|that|this|the|not|no|problem|problems|worries|worry|rush|idea|way"
                   r"|doubt|thanks|thank|need|pressure|hurry|prob|biggie|matter|one|wait|sorry|lol|haha|ok|okay"
                   r"|just|actually|but|and|more|longer|offense|offence|clue|luck|kidding|joke|reason|point|change"
                   r"|difference|hello|hi|hey|greetings?)")
_STYLE_VERBS = (r"(?:use|write|start|begin|end|keep|make|give|add|include|say|be|ask|check|put|answer|reply|respond"
                r"|mention|show|format|avoid|stop|don't|do not|try|remember|tell|explain|list|sign|greet|cite|round"
                r"|convert|spell|call|leave|skip|double-check)")

# (rule name, alternative patterns...): the first rule with a match names the verdict.
_NEGATIVE = _alternatives(
    ("thumbs_down", r"👎"),
    ("try_again", r"\btry (?:it |that |this )?again\b", r"\bretry\b", r"\bone more time\b", r"\bdo it again\b",
     r"\bredo\b", r"\bstart over\b"),
    ("undo", r"\bundo\b", r"\brevert (?:it|that|this|the)\b", r"\broll (?:it |that )?back\b"),
    ("wrong", r"\b(?:that|this|it|which|answer|result|output|everything)(?:'s| is| was| looks| seems)? "
              r"(?:still |all |completely |totally )?(?:wrong|incorrect|not right|not correct)\b",
     r"\byou(?:'re| are) wrong\b", r"\bgot (?:it|that|this) wrong\b", r"\bincorrect\b",
     r"\bwrong (?:answer|file|one|result|output|format|language|city|date|number|name|place|function|folder"
     r"|directory|branch|version)\b"),
    ("not_what_asked", r"\bnot what i (?:asked|wanted|meant|said|need(?:ed)?)\b", r"\bi (?:asked|said) for\b",
     r"\bi never asked\b"),
    ("i_meant", r"\b(?:no|nah)\b[,.!]?\s+(?:i meant|i said|i asked|i wanted|wrong|not that|not this|you)\b",
     r"\bi meant\b", r"\bnope\b"),
    ("thats_not", r"\b(?:that|this|it)(?:'s| is|s) not\b", r"\b(?:that|this|it) isn't\b", r"\bnot (?:that|this) one\b"),
    ("doesnt_work", r"\b(?:does|did|do|is|was|wo|ca)(?:n't| not) (?:work|run|compile|build|load|help|answer|fix|start"
                    r"|open)\w*\b",
     r"\bnot working\b", r"\b(?:it|that|this)(?:'s| is) broken\b", r"\byou broke\b",
     r"\bstill (?:broken|failing|fails|crash\w*|wrong|not|doesn't|does not|the same|happening|an issue|a problem)\b"),
    ("got_error", r"\b(?:get|got|getting|see|seeing|saw|throws?|threw|gives?|gave|giving|raises?|raised) (?:me |us )?"
                  r"(?:an?|the|this|that|another|a new|same|the same)? ?(?:\w+ )?(?:errors?|exceptions?|traceback"
                  r"|stack ?trace)\b",
     r"\b(?:it|that|this) (?:crashe[sd]|fails|failed)\b"),
    ("please_fix", r"\bplease fix\b", r"\bfix (?:it|this|that|the (?:bug|error|issue|code))\b", r"\bcan you fix\b",
     r"^(?:please )?correct (?:it|this|that|the)\b"),
    ("misunderstood", r"\b(?:you )?misunderst(?:ood|and)\b", r"\byou misread\b"),
    ("you_missed", r"\byou (?:forgot|missed|ignored|skipped|left out)\b",
     r"\byou didn't (?:do|answer|include|read|follow|use|change|listen)\b"),
    ("why_did_you", r"\bwhy did you\b", r"\bwhy would you\b", r"\bi told you\b"),
    ("change_request", r"\b(?:change|switch|rename|convert) (?:it|that|this|the \w+(?: \w+)?|\w+) "
                       r"(?:to|into|back to)\b",
     r"\b(?:instead|rather)[.!]*$", r"\buse \w+(?: \w+)? instead\b"),
    ("too_much", r"\btoo (?:long|short|verbose|wordy|complicated|complex|formal|casual|vague|generic|much|little"
                 r"|many|few)\b",
     r"\b(?:shorter|longer|simpler|briefer|more concise|less verbose|more detail(?:ed)?),? please\b",
     r"\bmake (?:it|that|this) (?:shorter|longer|simpler|more|less|clearer)\b", r"\bcan you shorten\b"),
    ("unhelpful", r"\buseless\b", r"\bunhelpful\b", r"\bnot helpful\b", r"\bmakes no sense\b", r"\bnonsense\b"),
    ("negated_praise", rf"\b{_NEGATORS}\s+(?:\w+\s+)?(?:{_PRAISE_WORDS}|exactly|what i)\b",
     rf"\b\w+n't (?:\w+ )?{_PRAISE_WORDS}\b"),  # \b first: no quadratic rescans of long words
    ("sounds_ai",  # "looks way too AI-written", "sounds like a robot", "my teacher will know this is AI"
     r"\b(?:looks?|sounds?|reads?|feels?|seems?)\s+(?:(?:way|so|very|too|really|obviously|clearly|pretty|super"
     r"|totally|completely|kinda|kind of|a bit|a little)\s+)*(?:like\s+)?(?:(?:it was|it's)\s+)?"
     rf"(?:(?:written|generated|made)\s+by\s+)?(?:an?\s+)?(?:{AI_WORDS}|bot|robot)"
     r"(?:[- ](?:written|generated|made|ish|like|y|sounding))?\b(?!\s+(?:is|are|was|will|can|could|would|might|has"
     r"|have)\b)",
     r"\b(?:know|tell|see|obvious|clear|notice|guess|spot)\w*\s+(?:that\s+)?(?:this|it)(?:'s|\s+is|\s+was)\s+"
     rf"(?:(?:written|generated|made)\s+by\s+)?(?:an?\s+)?(?:{AI_WORDS}|bot|robot)\b",
     rf"\b(?:too|so|very|obviously|clearly|totally|super)\s+(?:{AI_WORDS}|robotic|bot-?like|machine-?like)\b"),
    ("tone_complaint",  # "a bit rude", "too cold", "that's not very encouraging", "could be friendlier"
     r"\b(?:a bit|a little|a tad|kind of|kinda|sort of|pretty|overly|bit|that's|that was|you're|you are|you were"
     rf"|how|sounds|seems|feels|comes across as|came across as)\s+{_BAD_QUALITIES}\b{_QUESTION_AHEAD}",
     rf"\b{REPLY_IS}\s+(?:so|very|really|super|quite|rather|way too|too|pretty|a bit|kind of|kinda)?\s*"
     rf"{_BAD_QUALITIES}\b{_QUESTION_AHEAD}",
     rf"\b(?:really|so|very|super|quite|rather)\s+{_HARSH_QUALITIES}\b{_QUESTION_AHEAD}",
     rf"(?<!\bme )(?<!\byou )(?<!\bnot )(?<!\bnone )(?<!\bi'm )(?<!\bi am )\btoo\s+(?!{_NOT_JUDGED_TOO}\b)"
     rf"[a-z]+(?:-[a-z]+)?\b{_QUESTION_AHEAD_TOO}",
     rf"\b(?:not|isn't|wasn't|aren't|weren't|(?:doesn't|don't|didn't) (?:sound|read|look|feel|seem))\s+"
     rf"(?:very|that|so|really|particularly|super|exactly|all that|overly|terribly|especially|too)\s+"
     rf"{_GOOD_QUALITIES}\b",
     rf"\bnot\s+{_GOOD_QUALITIES}\s+(?:at all|enough)\b",
     rf"\b(?:that's|this is|it's|you're|you are|that was|this was|it was|you were)\s+not\s+{_GOOD_QUALITIES}\b",
     rf"\b(?:could|should|needs? to|has to|might)\s+(?:be|sound|read)\s+(?:a (?:bit|little|lot)\s+|much\s+"
     rf"|way\s+|even\s+|slightly\s+)?(?:(?:more|less)\s+(?!than\b)[a-z]+|{_BETTER})\b{_QUESTION_AHEAD}"),
    ("at_least", r"\byou\s+(?:could|can|might|should)(?:'ve|\s+have)?\s+at\s+(?:the\s+very\s+)?least\b",
     r"\bwould it kill you\b"),
    ("no_greeting", r"\bno\s+(?:hello|hi|hey|greeting|greetings|good morning|salutation)\b",
     r"\b(?:didn't|did not|never)\s+(?:even\s+)?(?:say|said|greet|greeted)\s+(?:hi|hello|hey|me)\b",
     r"\bwithout\s+(?:a\s+|any\s+)?(?:greeting|hello|hi)\b"),
    ("style_request",  # an instruction for the next reply: how to start it, write it, keep it, what to leave out
     _CLAUSE + r"(?:please\s+|pls\s+|just\s+|always\s+)?(?:start|begin|open|lead|end|finish|close|sign off)\s+"
     r"(?:(?:your|the|each|every)\s+(?:[\w'-]+\s+){0,2}?)?(?:with|by)\s+[\w\"'“]",
     r"\b(?:re)?write\s+(?:it|this|that|them|the\s+(?:[\w'-]+\s+)?(?:answer|reply|response|text|email|message"
     r"|comments?|feedback|letter|essay|post|summary|story|note))\s+(?:in|like|without|with|as|using|more|less|so"
     r"|again|differently)\b",
     r"\bmake\s+(?:it|this|that|them)\s+(?:sound|read|look|feel|seem)\b",
     r"\bkeep\s+(?:it|this|that|them|(?:the|your)\s+(?:answers?|repl(?:y|ies)|responses?|messages?|comments?"
     r"|feedback|text|email|tone))\s+(?:to|under|below|within|short|shorter|simple|simpler|brief|concise|casual"
     r"|light|plain|friendly|friendlier|professional|positive|tight|focused|clean|on topic|warm|polite|neutral|real"
     r"|human|natural)\b",
     _CLAUSE + r"(?:please\s+|pls\s+|just\s+|try to\s+|try and\s+|always\s+)?be\s+(?:a (?:bit|little|lot)\s+"
     rf"|much\s+|way\s+|even\s+|slightly\s+)?(?:more|less|{_GOOD_QUALITIES}|{_BETTER}|brief|honest|short"
     r"|quick|careful)\b",
     _CLAUSE + rf"(?:just\s+)?no\s+(?:[\w'-]+\s+){{0,2}}?{_STYLE_NOUNS}\b",
     rf"\bno\s+(?!{_NOT_FORBIDDING}(?![\w-]))[\w'-]+(?:\s+[\w'-]+){{0,2}}\s*(?:,|\band\b|\bor\b)\s*(?:and\s+|or\s+)?"
     rf"no\s+(?!{_NOT_FORBIDDING}(?![\w-]))\w",
     r"\b(?:next time|from now on|going forward|in (?:the )?future)[,:]?\s+(?:please\s+)?(?!(?:then|maybe|perhaps"
     r"|i|i'll|we|we'll|you'll|lol|haha|ok|okay|too|bye|see)\b)\w",
     _CLAUSE + rf"(?:please\s+|pls\s+|just\s+)?{_STYLE_VERBS}\b[^.!?\n]{{0,100}}?\b(?:next time|from now on"
     r"|going forward)\b"),
)

_POSITIVE = _alternatives(
    ("thumbs_up", r"👍", r"🙏", r"🎉", r"✅"),
    ("thanks", r"\bthanks?\b", r"\bthank you\b", r"\bthx\b", r"\bcheers\b", r"\bmuch appreciated\b",
     r"\bappreciate it\b"),
    ("works", r"\b(?:that|it|this) (?:works|worked)\b", r"\bworks (?:now|great|perfectly|fine|like a charm)\b",
     r"\bfixed it\b", r"\bthat did (?:it|the trick)\b"),
    ("praise", r"\b(?:perfect|great|awesome|excellent|brilliant|amazing|fantastic|wonderful|nice|cool|superb)\b",
     r"\blooks good\b", r"\blgtm\b", r"\bwell done\b", r"\bgood job\b", r"\bnice work\b", r"\bspot on\b",
     r"\blove it\b"),
    ("correct", r"\b(?:that's|that is|this is|yes,?|yep,?) (?:correct|right|it)\b", r"^(?:correct|right)[.!]*$",
     r"^(?:yes|yep|yeah)\b[.!]*$",
     r"\bexactly\b(?! (?:does|is|do|are|did|was|were|should|would|can|will)\b)"),  # not "what exactly does ..."
)

# Questions that merely contain a praise word ("is that correct?", "what exactly does it do?") are not praise.
_QUESTIONING = re.compile(r"\b(?:is|was|are|were) (?:that|this|it|these|those|the \w+) (?:really |still )?"
                          r"(?:correct|right|accurate|true|ok|okay|good|great)\b[^.!]*\?", re.IGNORECASE)


def classify_user_text(text: str) -> RuleMatch:
    """-1 for a correction / redo / complaint, +1 for explicit approval, 0 for anything else."""
    text = clean_user_text(text)
    if not text:
        return RuleMatch(0, "no_signal")
    for name, pattern in _NEGATIVE:
        match = pattern.search(text)
        if match:  # corrections win over politeness: "thanks, but that's wrong" is negative
            return RuleMatch(-1, f"user_negative:{name}", match.group(0).strip())
    unquestioned = _QUESTIONING.sub(" ", text)
    for name, pattern in _POSITIVE:
        match = pattern.search(unquestioned)
        if match:
            return RuleMatch(1, f"user_positive:{name}", match.group(0).strip())
    return RuleMatch(0, "no_signal")


def last_user_text(next_state: Sequence[dict]) -> str | None:
    """The cleaned text of the last user message of the next state (internal context skipped)."""
    for message in reversed(next_state):
        if (message.get("role") or "user") == "user" and not is_internal_context(message):
            return clean_user_text(message_text(message))
    return None


def combine_signals(*signals: RuleMatch | None) -> RuleMatch:
    """Any negative signal decides, then any positive one; neutral when nothing spoke."""
    present = [s for s in signals if s is not None]
    for wanted in (-1, 1):
        for signal in present:
            if signal.score == wanted:
                return signal
    return RuleMatch(0, "no_signal")


_WORD = re.compile(r"[a-z0-9']+")


def repeated_request(request: str, reply: str, min_overlap: float = 0.75) -> RuleMatch | None:
    """-1 when the user's reply restates their previous request almost word for word: it was not met."""
    asked, said = set(_WORD.findall(request.lower())), set(_WORD.findall(reply.lower()))
    if len(asked) < 3 or len(said) < 3:
        return None  # "ok", "yes please" are not restatements
    overlap = len(asked & said) / len(asked | said)
    return RuleMatch(-1, "user_negative:repeated_request", reply[:80]) if overlap >= min_overlap else None


def rules_verdict(next_state: Sequence[dict], request: str = "") -> RuleMatch:
    """The rules' verdict on a next state; `request` (the user's last request) enables repeat detection."""
    user_text = last_user_text(next_state)
    user_signal = classify_user_text(user_text) if user_text is not None else None
    repeat = repeated_request(request, user_text) if request and user_text else None
    return combine_signals(user_signal, repeat, classify_tool_results(next_state))


class RulesJudge:
    name = "rules"

    async def judge(self, turn: TurnForJudge) -> Judgement:
        started = time.monotonic()
        verdict = rules_verdict(turn.next_state, last_user_request(turn.prompt_messages))
        vote = Vote(score=verdict.score, rationale=verdict.describe(), source=self.name,
                    seconds=time.monotonic() - started)
        return Judgement(score=float(verdict.score), votes=[vote], judge=self.name,
                         rationale=vote.rationale if verdict.score else "", extras={"rule": verdict.rule})

    async def aclose(self) -> None:
        return None
