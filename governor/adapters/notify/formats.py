"""What a notice looks like on the wire: the governor's own JSON, or a Slack message."""

from __future__ import annotations

from typing import Any

from governor.domain.model import Severity
from governor.domain.notice import Notice

SOURCE = "gpu-governor"
MARK = {
    Severity.INFO: ":information_source:",
    Severity.WARNING: ":warning:",
    Severity.CRITICAL: ":rotating_light:",
}


def json_body(notice: Notice) -> dict[str, Any]:
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
    }


def slack_body(notice: Notice) -> dict[str, Any]:
    """An incoming-webhook message: `text` is all that Slack and its look-alikes require."""
    budget = f" (budget {notice.budget_id})" if notice.budget_id else ""
    text = (
        f"{MARK[notice.severity]} *{notice.severity.value.upper()}* "
        f"[{notice.category.value}] {_escape(notice.subject)}{budget}: {_escape(notice.message)}"
    )
    return {"text": text, "username": SOURCE}


def _escape(text: str) -> str:
    """Slack's mrkdwn reserves &, < and >."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
