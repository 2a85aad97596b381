"""The account sweep's pure decisions: each listed pod's fate, the operator's rules (matched
and validated), a stop rule's grace, and the labels written in a name."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from governor.domain.launch_labels import BUDGET_LABEL, LAUNCH_LABEL
from governor.domain.model import PodState
from governor.domain.ports import Listed, PodDescription, labels_in_name
from governor.domain.sweep import Fate, Labelled, SweepRule, judge, stop_due

BUDGETS = {"bud_1": "bud_1", "pilot": "bud_1", "bud_2": "bud_2"}
ADOPTING = Labelled(adopting=frozenset({"bud_1", "bud_2"}))


def pod(
    ref: str,
    state: PodState = PodState.RUNNING,
    name: str | None = None,
    **labels: str,
) -> Listed:
    return Listed(ref, PodDescription(state, Decimal("2.00")), name=name, labels=labels)


def fates(listed: list[Listed], *rules: SweepRule, registered: set[str] | None = None) -> Any:
    return [
        (v.pod.ref, v.fate, v.budget_id, v.stop_after_s)
        for v in judge("runpod", listed, registered or set(), BUDGETS, rules, ADOPTING)
    ]


def test_each_pod_has_one_fate() -> None:
    listed = [
        pod("governed"),
        pod("stopped", PodState.STOPPED),
        pod("labelled", **{BUDGET_LABEL: "pilot"}),
        pod("by-id", **{BUDGET_LABEL: "bud_2"}),
        pod("stray"),
    ]
    assert fates(listed, registered={"governed"}) == [
        ("governed", Fate.GOVERNED, None, None),
        ("stopped", Fate.IDLE, None, None),
        ("labelled", Fate.REGISTER, "bud_1", None),
        ("by-id", Fate.REGISTER, "bud_2", None),
        ("stray", Fate.UNGOVERNED, None, None),
    ]


def test_an_undocumented_state_bills() -> None:
    unknown = Listed("p", PodDescription(PodState.RUNNING, None, state_known=False))
    assert unknown.billing and not pod("q", PodState.STOPPED).billing


def test_the_first_matching_rule_of_the_account_decides() -> None:
    rules = (
        SweepRule("vast", name="*", stop_after_s=1),  # another account's
        SweepRule("runpod", label="team", value="nl*", adopt="pilot"),
        SweepRule("runpod", name="scratch-*", stop_after_s=600),
        SweepRule("runpod", name="*", adopt="no-such-budget"),
    )
    listed = [
        pod("nlp", team="nlp"),
        pod("scratch", name="scratch-a"),
        pod("other", name="mine"),
        pod("refused", name="scratch-b", **{BUDGET_LABEL: "pilot"}),
    ]
    verdicts = judge("runpod", listed, set(), BUDGETS, rules, ADOPTING)
    assert [(v.fate, v.budget_id, v.stop_after_s) for v in verdicts] == [
        (Fate.ADOPT, "bud_1", None),
        (Fate.UNGOVERNED, None, 600.0),
        (Fate.UNGOVERNED, None, None),
        (Fate.REGISTER, "bud_1", 600.0),  # the grace stands if its registration is refused
    ]
    assert "names no budget 'no-such-budget'" in verdicts[2].reason


def test_a_label_alone_registers_a_pod_only_where_its_budget_adopts_labelled_pods() -> None:
    listed = [
        pod("alone", name="alone", **{BUDGET_LABEL: "pilot"}),
        pod("copied", **{BUDGET_LABEL: "pilot", LAUNCH_LABEL: "lch_other"}),
        pod("adopting", **{BUDGET_LABEL: "bud_2"}),
    ]
    rule = SweepRule("runpod", name="alone", stop_after_s=60)
    verdicts = judge(
        "runpod", listed, set(), BUDGETS, (rule,), Labelled(adopting=frozenset({"bud_2"}))
    )
    assert [(v.fate, v.budget_id, v.not_adopted_by, v.stop_after_s) for v in verdicts] == [
        (Fate.UNGOVERNED, None, "bud_1", 60.0),  # its stop rule's grace still stands
        (Fate.UNGOVERNED, None, "bud_1", None),
        (Fate.REGISTER, "bud_2", None, None),
    ]
    assert f"{BUDGET_LABEL}='pilot' alone does not register" in verdicts[0].reason
    assert "no launch label" in verdicts[0].reason
    assert f"{LAUNCH_LABEL}='lch_other' names none" in verdicts[1].reason


def test_an_operators_adoption_rule_adopts_a_labelled_pod_its_budget_did_not() -> None:
    rule = SweepRule("runpod", label="team", adopt="bud_2")
    (verdict,) = judge(
        "runpod", [pod("p", team="nlp", **{BUDGET_LABEL: "pilot"})], set(), BUDGETS, (rule,)
    )
    assert (verdict.fate, verdict.budget_id) == (Fate.ADOPT, "bud_2")


def test_a_launch_waiting_for_its_pod_is_won_by_the_first_pod_naming_it() -> None:
    launched = {BUDGET_LABEL: "pilot", LAUNCH_LABEL: "lch_1"}
    listed = [
        pod("first", **launched),
        pod("copy", **launched),
        pod("elsewhere", **{BUDGET_LABEL: "bud_2", LAUNCH_LABEL: "lch_1"}),
        pod("tied", **{BUDGET_LABEL: "pilot", LAUNCH_LABEL: "lch_2"}),
    ]
    waiting = Labelled(waiting={"lch_1": "bud_1"})  # lch_2 has its pod already
    verdicts = judge("runpod", listed, set(), BUDGETS, (), waiting)
    assert [(v.fate, v.budget_id, v.launch, v.not_adopted_by) for v in verdicts] == [
        (Fate.REGISTER, "bud_1", "lch_1", None),
        (Fate.UNGOVERNED, None, None, "bud_1"),  # a copy of its label wins nothing
        (Fate.UNGOVERNED, None, None, "bud_2"),  # another budget's launch
        (Fate.UNGOVERNED, None, None, "bud_1"),
    ]
    adopted = judge(
        "runpod", listed[:2], set(), BUDGETS, (), replace(waiting, adopting=ADOPTING.adopting)
    )
    assert [(v.fate, v.launch) for v in adopted] == [
        (Fate.REGISTER, "lch_1"),
        (Fate.REGISTER, None),  # adopted by its label, tied to no launch
    ]


def test_a_label_naming_no_budget_is_said() -> None:
    (verdict,) = judge("runpod", [pod("p", **{BUDGET_LABEL: "gone"})], set(), BUDGETS, ())
    assert verdict.fate is Fate.UNGOVERNED and "names no budget" in verdict.reason


def test_the_launch_label_rides_with_the_verdict() -> None:
    (verdict,) = judge("runpod", [pod("p", **{LAUNCH_LABEL: "l-1"})], set(), BUDGETS, ())
    assert verdict.launch_id == "l-1"


def test_a_stop_is_due_at_the_grace_never_before_never_without_a_rule() -> None:
    seen = datetime(2026, 1, 1, tzinfo=UTC)
    assert not stop_due(seen, 60, seen + timedelta(seconds=59.999))
    assert stop_due(seen, 60, seen + timedelta(seconds=60))
    assert not stop_due(seen, None, seen + timedelta(days=365))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"name": "*", "adopt": "b"}, "provider is required"),
        ({"provider": "aws", "adopt": "b"}, "name or label is required"),
        ({"provider": "aws", "name": "*"}, "exactly one of adopt"),
        ({"provider": "aws", "name": "*", "adopt": "b", "stop_after_s": 5}, "exactly one"),
        ({"provider": "aws", "name": "*", "stop_after_s": -1}, "seconds >= 0"),
        ({"provider": "aws", "name": "*", "stop_after_s": True}, "seconds >= 0"),
        ({"provider": "aws", "value": "x", "name": "*", "adopt": "b"}, "value needs label"),
        ({"provider": "aws", "name": "", "adopt": "b"}, "non-empty string"),
        ({"provider": "aws", "name": "*", "adopt": "b", "terminate": True}, "unknown keys"),
    ],
)
def test_a_malformed_rule_is_refused_saying_why(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        SweepRule.of(raw)


def test_a_rule_reads_its_settings_form() -> None:
    rule = SweepRule.of({"provider": "aws", "label": "team", "value": "nlp", "stop_after_s": 60})
    assert rule == SweepRule("aws", label="team", value="nlp", stop_after_s=60.0)
    assert rule.matches("aws", pod("p", team="nlp"))
    assert not rule.matches("aws", pod("p", team="cv")) and not rule.matches("aws", pod("p"))
    assert not rule.matches("gcp", pod("p", team="nlp"))


def test_labels_are_read_from_a_name_that_writes_them() -> None:
    assert labels_in_name("governor-budget=llama-lora,team=nlp extra") == {
        "governor-budget": "llama-lora",
        "team": "nlp",
    }
    assert labels_in_name("my notebook") == {} and labels_in_name(None) == {}
    assert labels_in_name("=x,y=,a=b=c") == {"a": "b=c"}
