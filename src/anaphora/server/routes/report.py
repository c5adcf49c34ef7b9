"""The operator's report (``GET /v1/admin/report``): what readers asked most, by what was searched, and what they
did not get, over a time range, as JSON or CSV. Administrators only (anyone when auth is 'none'): it holds every
user's questions. Built from the store at each request (:func:`anaphora.app.report_of`), so an erased user is not
in it."""

from __future__ import annotations

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from anaphora.app import report_of
from anaphora.report import Report, ReportOptions, to_csv
from anaphora.report.grouping import MIN_SIMILARITY
from anaphora.report.ranges import time_range
from anaphora.server.routes.deps import Admin, Svc

router = APIRouter(tags=["admin"])
_CSV = {200: {"content": {"text/csv": {"schema": {"type": "string"}}}}}
When = Query(max_length=64, description="ISO date or date-time (UTC unless offset), Unix seconds, or 7d / 24h / 30m")


@router.get(
    "/v1/admin/report",
    response_model=Report,
    responses=_CSV,
    summary="What readers asked most and did not get, over a time range (JSON, or CSV with format=csv)",
)
async def read_report(
    user: Admin,
    svc: Svc,
    since: Annotated[str | None, When] = None,
    until: Annotated[str | None, When] = None,
    format: Annotated[Literal["json", "csv"], Query(description="json (default) or csv")] = "json",
    top: Annotated[int, Query(ge=1, le=500, description="topics and pages listed")] = 20,
    rows: Annotated[int, Query(ge=1, le=5000, description="gap and thumbs-down rows listed")] = 200,
    min_similarity: Annotated[
        float, Query(ge=0, le=1, description="how similar two searches must be to count as one topic")
    ] = MIN_SIMILARITY,
) -> Report | Response:
    start, end = time_range(since, until, time.time())
    options = ReportOptions(top=top, rows=rows, min_similarity=min_similarity)
    report = await report_of(svc.components, start, end, options)
    if format == "csv":
        return Response(
            to_csv(report),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": 'attachment; filename="anaphora-report.csv"'},
        )
    return report
