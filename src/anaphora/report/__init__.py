"""The operator's report: what readers asked most (by what was searched), what they did not get (refused or
weakly supported answers, thumbs down), which pages answer and which never do. Read from the stored turns and
their traces (:class:`~anaphora.store.protocols.TurnLog`); docs/server.md#the-report."""

from anaphora.report.build import ReportOptions, build_report
from anaphora.report.formats import to_csv, to_text
from anaphora.report.model import Report
from anaphora.report.signals import gap_of

__all__ = ["Report", "ReportOptions", "build_report", "gap_of", "to_csv", "to_text"]
