"""The LLM user: a model behind an OpenAI-compatible Chat Completions endpoint plays the task's
user in its own words (`STATEGYM_USER_MODEL_URL`, docs/conversations.md).

What it may decide is bounded by the script. The model answers JSON: its reply, what the
message was (a proposal to confirm, a question for facts, other) and which facts it tells. A
confirmation still needs the proposal to name the pending change's ids and no look-alike (the
scripted user's rule), so what verify trusts does not rest on the model. Guards: a reply may
state only facts of the script it declares, names no look-alike unless it corrects, and does not
end the conversation while a change is pending. A timeout, an HTTP error, malformed JSON or a
broken guard (after one retry) raises SimulatorFailed: the sample is masked, not scored 0.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import httpx

from app.core.conversation import Turn, UserScript, names, reply_to
from app.sdk.user import Exchange, SimulatorFailed
from app.settings import Settings

# Words by which a reply would end the conversation.
ENDINGS = ("goodbye", "bye", "###stop###", "that's all", "that is all", "nothing else")
RETRIES = 1  # a broken guard or malformed answer is asked again once

SYSTEM = """You play a customer talking to a support agent. Stay in character; reply in one to
three short sentences, in your own words. Your goal: {goal}
Facts you know (tell one only when the agent asks for it, never volunteer it): {facts}
The change you want now: {pending}
Rules: never state a fact that is not in the list; if the agent proposes exactly the change you
want now and asks you to confirm, agree{mind}; if it proposes something else, say no and say what
you want; do not end the conversation before your changes are made.
Answer ONLY a JSON object: {{"reply": "...", "message_kind": "proposal" | "question" | "other",
"facts_told": ["<fact key>", ...]}}"""


class LLMUser:
    """A UserSimulator backed by an OpenAI-compatible endpoint (Chat Completions)."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 30.0
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.name = f"llm:{model}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s

    def reply(self, script: UserScript, history: Sequence[Exchange], message: str) -> Turn:
        rule = reply_to(script, [e.turn for e in history], message)  # the trusted structure
        last = "malformed"
        for _ in range(1 + RETRIES):
            answer = self._ask(script, history, message, rule.stage)
            problem = _guard(script, answer, rule)
            if problem is None:
                return _turn(answer, rule, history[-1].turn.stage if history else 0)
            last = problem
        raise SimulatorFailed(last)

    def _ask(
        self, script: UserScript, history: Sequence[Exchange], message: str, stage: int
    ) -> dict[str, Any]:
        pending = script.changes[stage] if stage < len(script.changes) else None
        mind = (
            f", except that on the first such proposal you change your mind: "
            f"{pending.change_of_mind}"
            if pending is not None and pending.change_of_mind
            else ""
        )
        system = SYSTEM.format(
            goal=script.goal,
            facts=json.dumps({f.key: f.value for f in script.facts}),
            pending="none (all done)" if pending is None else ", ".join(pending.identifiers),
            mind=mind,
        )
        messages: list[dict[str, str]] = [{"role": "system", "content": system}]
        for exchange in history:
            messages += [
                {"role": "user", "content": exchange.message},
                {"role": "assistant", "content": exchange.turn.reply},
            ]
        messages.append({"role": "user", "content": message})
        body = {"model": self.model, "messages": messages, "temperature": 0}
        try:
            r = httpx.post(self.url, json=body, headers=self._headers, timeout=self._timeout)
        except httpx.TimeoutException:
            raise SimulatorFailed("timeout") from None
        except httpx.HTTPError as exc:
            raise SimulatorFailed("unreachable", str(exc)[:200]) from None
        if r.status_code != 200:
            raise SimulatorFailed("http_error", f"HTTP {r.status_code}")
        try:
            content = r.json()["choices"][0]["message"]["content"]
            match = re.search(r"\{.*\}", content or "", re.S)
            answer = json.loads(match.group(0)) if match else None
        except (ValueError, KeyError, IndexError, TypeError):
            answer = None
        if not isinstance(answer, dict) or not isinstance(answer.get("reply"), str):
            return {"_malformed": True}
        return answer


def llm_user_of(settings: Settings) -> LLMUser | None:
    """The configured LLM user (None: the scripted user plays). Its wait fits in a tool call's
    time limit, which the whole message_user call counts against."""
    if not settings.user_model_url:
        return None
    timeout = min(settings.user_model_timeout_s, settings.tool_time_limit_ms / 1000 * 0.8)
    return LLMUser(settings.user_model_url, settings.user_model, settings.user_model_key, timeout)


def _guard(script: UserScript, answer: dict[str, Any], rule: Turn) -> str | None:
    """What is wrong with the model's answer (None: usable)."""
    if answer.get("_malformed") or not answer.get("reply", "").strip():
        return "malformed"
    reply = answer["reply"]
    raw = answer.get("facts_told")
    told: list[Any] = raw if isinstance(raw, list) else []
    for fact in script.facts:
        if fact.key not in told and names(reply, fact.value):
            return "stated_a_fact_not_declared"
    if rule.act != "correct":
        wrong = {w for c in script.changes for w in c.wrong}
        if any(names(reply, w) for w in wrong):
            return "named_a_look_alike"
    pending = rule.stage < len(script.changes)
    if pending and any(e in reply.lower() for e in ENDINGS):
        return "ended_with_a_change_pending"
    return None


def _turn(answer: dict[str, Any], rule: Turn, before: int) -> Turn:
    """The model's words on the rule's structure: a confirmation (or change of mind) only where
    the rule finds one and the model took the message as a proposal (else the stage stays at
    `before`)."""
    reply = answer["reply"].strip()
    if rule.act in ("confirm", "change_of_mind") and answer.get("message_kind") != "proposal":
        return Turn(reply, "unclear", (), before)
    if rule.act in ("correct", "change_of_mind"):
        # The script's words: a model that agreed to a wrong proposal, or missed the change of
        # mind, would tell the agent the opposite of what verify holds it to.
        return rule
    return Turn(reply, rule.act, rule.confirms, rule.stage)
