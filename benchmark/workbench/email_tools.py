"""Email tools (WorkBench ``email.*``): one mailbox, inbox and outbox in a single table.

Columns: ``email_id``, ``inbox/outbox``, ``sender/recipient`` (the other
party), ``subject``, ``sent_datetime``, ``body``.  Semantics as WorkBench
implements them: search keeps emails whose subject + body + sender text
contains every word of the query (case-insensitive), filters on the sent
*date* (both bounds inclusive), newest first, at most 5.  A sent email is an
``outbox`` row dated :data:`~benchmark.workbench.toolspec.CURRENT_TIME` whose
id is the largest id + 1 *without* zero padding (so the first one sent is
``500``, as in WorkBench); recipients are stored lower-cased.  A forward sends
``FW: <subject>`` with the same body; a reply sends the same subject to the
original's other party.
"""

from __future__ import annotations

from typing import Any

from benchmark.workbench.state import WorkbenchState
from benchmark.workbench.toolspec import (
    CURRENT_TIME,
    ToolError,
    get_field,
    next_id,
    parse_time,
    tool,
)

TABLE = "email"
FIELDS = '"email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body"'


def get_email_information_by_id(state: WorkbenchState, email_id: str | None = None,
                                 field: str | None = None) -> dict[str, Any]:
    return get_field(state, TABLE, email_id, field, "Email")


def search_emails(state: WorkbenchState, query: str | None = None, date_min: str | None = None,
                  date_max: str | None = None) -> list[dict[str, Any]] | str:
    words = (query or "").lower().split()
    low = parse_time(date_min, "date_min").date() if date_min else None
    high = parse_time(date_max, "date_max").date() if date_max else None
    hits = []
    for row in state.table(TABLE).rows:
        text = f"{row['subject']} {row['body']} {row['sender/recipient']}".lower()
        if not all(w in text for w in words):
            continue
        day = parse_time(row["sent_datetime"], "sent_datetime").date()
        if (low is None or day >= low) and (high is None or day <= high):
            hits.append(dict(row))
    hits.sort(key=lambda r: r["sent_datetime"], reverse=True)  # stable: ties keep table order
    return hits[:5] if hits else "No emails found."


def send_email(state: WorkbenchState, recipient: str | None = None, subject: str | None = None,
               body: str | None = None) -> str:
    if not recipient or not subject or not body:
        raise ToolError("Recipient, subject, or body not provided.")
    if "@" not in recipient or "." not in recipient:
        raise ToolError("Invalid recipient email address.")
    state.table(TABLE).rows.append({"email_id": next_id(state, TABLE, width=0), "inbox/outbox": "outbox",
                                    "sender/recipient": recipient.lower(), "subject": subject,
                                    "sent_datetime": CURRENT_TIME, "body": body})
    return "Email sent successfully."


def delete_email(state: WorkbenchState, email_id: str | None = None) -> str:
    if not email_id:
        raise ToolError("Email ID not provided.")
    table = state.table(TABLE)
    if table.find(email_id) is None:
        raise ToolError("Email not found.")
    table.rows[:] = [r for r in table.rows if r["email_id"] != email_id]
    return "Email deleted successfully."


def forward_email(state: WorkbenchState, email_id: str | None = None, recipient: str | None = None) -> str:
    if not email_id or not recipient:
        raise ToolError("Email ID or recipient not provided.")
    original = state.table(TABLE).find(email_id)
    if original is None:
        raise ToolError("Email not found.")
    send_email(state, recipient, f"FW: {original['subject']}", original["body"])
    return "Email forwarded successfully."


def reply_email(state: WorkbenchState, email_id: str | None = None, body: str | None = None) -> str:
    if not email_id or not body:
        raise ToolError("Email ID or body not provided.")
    original = state.table(TABLE).find(email_id)
    if original is None:
        raise ToolError("Email not found.")
    send_email(state, original["sender/recipient"], original["subject"], body)
    return "Email replied successfully."


TOOLS = [
    tool("email.get_email_information_by_id", get_email_information_by_id,
         "Return one field of the email with the given ID, as {field: value}.", side_effects=False,
         email_id="8-digit ID of the email.", field=f"Field to return, one of {FIELDS}."),
    tool("email.search_emails", search_emails,
         "Search emails: every word of the query must appear in the subject, body or sender/recipient; "
         "newest first, at most 5 emails.", side_effects=False,
         query="Words to look for (empty: all emails).",
         date_min='Earliest sent date to include, format "YYYY-MM-DD".',
         date_max='Latest sent date to include, format "YYYY-MM-DD".'),
    tool("email.send_email", send_email, "Send an email.", side_effects=True,
         recipient="Email address of the recipient.", subject="Subject line.", body="Body text."),
    tool("email.delete_email", delete_email, "Delete the email with the given ID.", side_effects=True,
         email_id="8-digit ID of the email."),
    tool("email.forward_email", forward_email, "Forward the email with the given ID to a recipient.",
         side_effects=True, email_id="8-digit ID of the email.", recipient="Email address to forward to."),
    tool("email.reply_email", reply_email, "Reply to the email with the given ID.", side_effects=True,
         email_id="8-digit ID of the email.", body="Body text of the reply."),
]
