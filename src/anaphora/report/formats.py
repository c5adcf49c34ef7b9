"""The report as text (a terminal) and as CSV (a spreadsheet): one CSV of sections, each row tagged with its
section, so a single file holds the whole report and filters by the first column."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

from anaphora.report.model import Report

CSV_HEADER = ["section", "name", "count", "refused", "low_support", "follow_ups", "detail"]


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def to_csv(report: Report) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    writer.writerow(["summary", "turns", report.turns, "", "", "", f"{when(report.since)} to {when(report.until)}"])
    for kind in ("documentation", "chit_chat", "meta", "statement"):
        writer.writerow(["share", kind, getattr(report.shares, kind), "", "", "", ""])
    for vote, count in report.votes.items():
        writer.writerow(["votes", vote, count, "", "", "", ""])
    for section, topics in (("top_topic", report.top_topics), ("gap_topic", report.gap_topics)):
        for t in topics:
            detail = " | ".join(t.questions)
            writer.writerow([section, t.topic, t.turns, t.refused, t.low_support, t.follow_ups, detail])
    for g in report.gaps:
        writer.writerow(["gap", g.searched, 1, int(g.gap == "refused"), int(g.gap == "low_support"), "", g.question])
    for d in report.thumbs_down:
        writer.writerow(["thumbs_down", d.searched, 1, "", "", "", f"{d.comment} | cited: {', '.join(d.cited)}"])
    for p in report.pages_cited_most:
        writer.writerow(["page_cited", p.source, p.citations, "", "", "", ""])
    for source in report.pages_never_cited:
        writer.writerow(["page_never_cited", source, 0, "", "", "", ""])
    return out.getvalue()


def to_text(report: Report) -> str:
    s = report.shares
    lines = [
        f"Report {when(report.since)} to {when(report.until)}: {report.turns} turns, {report.conversations} "
        f"conversations, {report.users} users" + (" (truncated: narrow the range)" if report.truncated else ""),
        f"  questions {s.documentation}, chit-chat {s.chit_chat} ({s.chit_chat_share:.0%}), about the conversation "
        f"{s.meta} ({s.meta_share:.0%}), statements {s.statement}; votes up {report.votes['up']}, down "
        f"{report.votes['down']}",
        f"  grouping: {report.grouping}",
        "",
        "Asked most (by what was searched):",
    ]
    lines += [
        f"  {t.turns:>4}  {t.topic}" + (f"  ({t.follow_ups} as follow-ups)" if t.follow_ups else "")
        for t in report.top_topics
    ] or ["  (none)"]
    lines += ["", "Documentation gaps (refused / low support):"]
    lines += [f"  {t.refused:>4} / {t.low_support:<4} {t.topic}" for t in report.gap_topics] or ["  (none)"]
    lines += ["", "Thumbs down:"]
    lines += [
        f"  {d.searched}" + (f'  "{d.comment}"' if d.comment else "") + f"  cited: {', '.join(d.cited) or '-'}"
        for d in report.thumbs_down
    ] or ["  (none)"]
    lines += ["", "Pages cited most:"]
    lines += [f"  {p.citations:>4}  {p.source}" for p in report.pages_cited_most] or ["  (none)"]
    lines += ["", f"Pages never cited ({len(report.pages_never_cited)}):"]
    lines += [f"  {source}" for source in report.pages_never_cited] or ["  (none)"]
    return "\n".join(lines) + "\n"
