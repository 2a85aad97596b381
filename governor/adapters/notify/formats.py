"""What a notice looks like on the wire: the governor's own JSON, or a Slack message.

Both name the budget and carry its money (as of the latest enforcement pass) and, when the
server knows its public address, a link to the dashboard: what someone woken by the message
needs to decide what to do.
"""

from __future__ import annotations

from typing import Any

from governor.domain.ledger import committed_in_parts
from governor.domain.model import Severity
from governor.domain.money import dollars, format_usd
from governor.domain.notice import Money, Notice

SOURCE = "gpu-governor"
MARK = {
    Severity.INFO: ":information_source:",
    Severity.WARNING: ":warning:",
    Severity.CRITICAL: ":rotating_light:",
}


def link(notice: Notice, public_url: str | None) -> str | None:
    """The dashboard: the notice's budget's own page when it has one."""
    if public_url is None:
        return None
    return f"{public_url}/status" + (f"/budgets/{notice.budget_id}" if notice.budget_id else "")


def json_body(notice: Notice, public_url: str | None = None) -> dict[str, Any]:
    money = notice.money
    return {
        "source": SOURCE,
        "event": {
            "id": notice.event_id,
            "at": notice.at.isoformat(),
            "severity": notice.severity.value,
            "category": notice.category.value,
            "subject": notice.subject,
            "budget_id": notice.budget_id,
            "message": notice.message,
            "evidence": dict(notice.evidence),
        },
        "budget": None
        if notice.budget_id is None
        else {
            "id": notice.budget_id,
            "name": notice.budget_name,
            **_figures(money),
        },
        "link": link(notice, public_url),
    }


def _figures(money: Money | None) -> dict[str, str | None]:
    """Spent, committed spend's parts and committed spend, the ceiling and what remains."""
    f = None if money is None else money.figures
    amounts = {
        "spent_usd": None if f is None else f.spent,
        "shutdown_usd": None if f is None else f.shutdown,
        "storage_tail_usd": None if f is None else f.storage_tail,
        "reserve_usd": None if f is None else f.reserve,
        "committed_usd": None if f is None else f.committed,
        "ceiling_usd": None if f is None else f.effective_ceiling,
        "remaining_usd": None if f is None else f.remaining,
    }
    return {key: None if value is None else format_usd(value) for key, value in amounts.items()}


def slack_body(notice: Notice, public_url: str | None = None) -> dict[str, Any]:
    """An incoming-webhook message: `text` (all that Slack's look-alikes read, and what
    Slack shows in a notification) and blocks: the budget, the reason, the money, the link."""
    budget = _budget(notice)
    head = f"{MARK[notice.severity]} *{notice.severity.value.upper()}*"
    text = (
        f"{head} [{notice.category.value}] {_escape(notice.subject)}"
        f"{f' ({budget})' if budget else ''}: {_escape(notice.message)}"
    )
    blocks: list[dict[str, Any]] = [
        _section(f"{head}{f' · {budget}' if budget else ''}\n{_escape(notice.message)}")
    ]
    if notice.money is not None:
        money = notice.money
        blocks.append(
            {
                "type": "section",
                "fields": [
                    _mrkdwn(f"*Spent*\n{dollars(money.spent)}"),
                    _mrkdwn(f"*Ceiling*\n{dollars(money.ceiling)}"),
                    _mrkdwn(f"*Remaining*\n{_remaining(money)}"),
                    _mrkdwn(f"*Committed*\n{committed_in_parts(money.figures)}"),
                ],
            }
        )
    to = link(notice, public_url)
    if to is not None:
        blocks.append(_section(f"<{to}|Open the dashboard>"))
    blocks.append(
        {
            "type": "context",
            "elements": [
                _mrkdwn(
                    f"{notice.category.value} · {_escape(notice.subject)} · event "
                    f"{notice.event_id} · {notice.at:%Y-%m-%d %H:%M:%S} UTC"
                )
            ],
        }
    )
    return {"text": text, "blocks": blocks, "username": SOURCE}


def _remaining(money: Money) -> str:
    if money.remaining < 0:
        return f"none: {dollars(-money.remaining)} over"
    return dollars(money.remaining)


def _budget(notice: Notice) -> str:
    if notice.budget_id is None:
        return ""
    if notice.budget_name is None:
        return f"budget {notice.budget_id}"
    return f"budget *{_escape(notice.budget_name)}* ({notice.budget_id})"


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text)}


def _mrkdwn(text: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": text}


def _escape(text: str) -> str:
    """Slack's mrkdwn reserves &, < and >."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
