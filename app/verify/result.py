"""The verify result: reward, components, evidence, failure and mask, step rewards; one payload.

Built by `verify_result` (app/verify/session_verify.py), extended by a replay, the judge and
the runtime, and turned into JSON once by `to_payload`. The payload's key order is part of
the contract (recorded results are hashed as bytes): the failure fields go where they were
first set (after the scored evidence, after the step fields, or after the judge), as a dict
built in those stages would have placed them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from app.verify.evidence import Known, cap_evidence

# Where a failure field first went in the payload: with the scored evidence, after the step
# fields (a verify's own masks and voids), or after a replay's fields (the judge's).
Slot = Literal["scored", "verify", "judge"]
FailureField = Literal["failure_reason", "mask_sample", "failure_kind"]
MASK_ORDER: tuple[FailureField, ...] = ("mask_sample", "failure_kind", "failure_reason")


@dataclass
class Evidence:
    """`verification`: the comparison's evidence (capped), then the parts added to it."""

    diff: dict[str, Any]
    trajectory: dict[str, Any] | None = None
    step_rewards_skipped: str | None = None
    conversation: dict[str, Any] | None = None
    invariant_violations: list[str] | None = None
    gold_failed_calls: list[dict[str, Any]] | None = None
    judge: dict[str, Any] | None = None

    def to_payload(self) -> dict[str, Any]:
        out = dict(self.diff)
        for key in (
            "trajectory",
            "step_rewards_skipped",
            "conversation",
            "invariant_violations",
            "gold_failed_calls",
            "judge",
        ):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass
class VerifyResult:
    """What /verify answers (besides the echoed body). `components` and `evidence` are None
    for a sample masked before anything was scored (a lost session, an unfinished replay)."""

    reward: float
    components: dict[str, float] | None = None
    evidence: Evidence | None = None
    step_rewards: list[float] | None = None
    turn_rewards: list[float] | None = None
    trajectory_mismatch: bool = False
    failure_reason: str | None = None
    failure_kind: str | None = None
    mask_sample: bool = False
    verified_by: str | None = None
    replayed_calls: int | None = None
    # Scored only by the judge (a masked sample it graded): components after the replay fields.
    scored_late: bool = False
    task_mismatch: list[str] | None = None
    # Evidence parts capped with nothing cut: the stored copy does not walk them again.
    known: Known = field(default_factory=dict, repr=False, compare=False)
    _placed: dict[FailureField, Slot] = field(default_factory=dict, repr=False)

    @classmethod
    def masked(cls, kind: str, reason: str) -> VerifyResult:
        """A sample training must drop (nothing measured): reward 0, masked, saying why."""
        result = cls(reward=0.0)
        result.mask(kind, reason, "verify")
        return result

    def copy(self) -> VerifyResult:
        """A copy whose components, evidence and failure fields change apart from these."""
        return replace(
            self,
            components=None if self.components is None else dict(self.components),
            evidence=None if self.evidence is None else replace(self.evidence),
            _placed=dict(self._placed),
            known=self.known,
        )

    def cap(self, value: Any) -> Any:
        """`value` capped as evidence (app/verify/evidence.py), remembered for the stored copy."""
        return cap_evidence(value, known=self.known)

    def place(self, slot: Slot, *names: FailureField) -> None:
        """Note where failure fields go in the payload, unless they were placed already."""
        for name in names:
            self._placed.setdefault(name, slot)

    def set_reason(self, reason: str, slot: Slot) -> None:
        self.place(slot, "failure_reason")
        self.failure_reason = reason

    def add_reason(self, reason: str, slot: Slot) -> None:
        """`reason` after the failure reason there is ("; ")."""
        self.set_reason("; ".join(filter(None, [self.failure_reason, reason])), slot)

    def mask(
        self, kind: str, reason: str, slot: Slot, order: tuple[FailureField, ...] = MASK_ORDER
    ) -> None:
        """Masked: training drops the sample; `reason` replaces the failure reason."""
        self.place(slot, *order)
        self.mask_sample, self.failure_kind = True, kind
        self.set_reason(reason, slot)

    def to_payload(self) -> dict[str, Any]:
        """The JSON object /verify answers, keys in the order of the contract."""
        out: dict[str, Any] = {"reward": self.reward}
        if not self.scored_late:
            self._scored(out)
        self._failure(out, "scored")
        if self.step_rewards is not None:
            out["step_rewards"] = self.step_rewards
        if self.turn_rewards is not None:
            out["turn_rewards"] = self.turn_rewards
        if self.trajectory_mismatch:
            out["trajectory_mismatch"] = True
        self._failure(out, "verify")
        if self.verified_by is not None:
            out["verified_by"] = self.verified_by
        if self.replayed_calls is not None:
            out["replayed_calls"] = self.replayed_calls
        if self.scored_late:
            self._scored(out)
        self._failure(out, "judge")
        if self.task_mismatch is not None:
            out["task_mismatch"] = list(self.task_mismatch)
        return out

    def stored(self) -> Any:
        """What the control database keeps: the payload capped in size as a whole (failure
        reasons and the judge's grade quote text of any size too); the evidence capped when
        it was set is not walked again."""
        return cap_evidence(self.to_payload(), known=self.known)

    def _scored(self, out: dict[str, Any]) -> None:
        if self.components is not None:
            out["reward_components"] = self.components
        if self.evidence is not None:
            out["verification"] = self.evidence.to_payload()

    def _failure(self, out: dict[str, Any], slot: Slot) -> None:
        values = {
            "failure_reason": self.failure_reason,
            "mask_sample": True if self.mask_sample else None,
            "failure_kind": self.failure_kind,
        }
        for name, placed in self._placed.items():
            if placed == slot and values[name] is not None:
                out[name] = values[name]
