"""The documents API: ingest uploads or a server-side path as a background job, follow the job, list and delete
documents. Administrators only when auth is 'jwt' (anyone when auth is 'none')."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from anaphora.errors import InputError, NotFoundError
from anaphora.ingest.urls import GENERATORS, check_base_url
from anaphora.server.jobs import Upload, job_view
from anaphora.server.json_body import parse_json
from anaphora.server.routes.deps import Admin, Svc
from anaphora.server.schemas import DocumentDeleted, DocumentList, DocumentOut, IngestPath, JobOut, JobStarted

router = APIRouter(tags=["documents"])
UPLOAD_FIELD = "files"
_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {UPLOAD_FIELD: {"type": "array", "items": {"type": "string", "format": "binary"}}},
                "required": [UPLOAD_FIELD],
            }
        },
        "application/json": {
            "schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "minLength": 1, "maxLength": 4096},
                    # null as if left out (IngestPath's defaults): schemathesis sent null and it was accepted
                    "base_url": {"type": ["string", "null"], "maxLength": 2048},
                    "generator": {"type": ["string", "null"], "maxLength": 32},
                },
                "required": ["path"],
                "additionalProperties": False,
            }
        },
    },
}


async def _uploads(request: Request) -> list[Upload]:
    try:
        form = await request.form()
    except Exception as exc:  # malformed multipart: python-multipart's own errors
        detail = getattr(exc, "detail", None) or exc
        raise InputError(
            f"the multipart body cannot be read: {detail}", hint="send files as multipart/form-data"
        ) from exc
    try:
        uploads = [
            Upload(value.filename or "", await value.read())
            for _, value in form.multi_items()
            if isinstance(value, UploadFile)
        ]
    finally:
        await form.close()
    if not uploads:
        raise InputError(
            "the multipart body has no files", hint=f"send one or more files in the '{UPLOAD_FIELD}' field"
        )
    return uploads


async def _path(request: Request) -> IngestPath:
    value = parse_json(await request.body())
    try:
        body = IngestPath.model_validate(value)
    except ValidationError as exc:
        raise InputError(
            'the JSON body must be {"path": "<file or folder on the server, or a site\'s URL>"} (optionally with '
            '"base_url" and "generator")',
            hint="or upload files as multipart/form-data",
        ) from exc
    if body.base_url is not None:
        check_base_url(body.base_url)
    if body.generator is not None and body.generator not in GENERATORS:
        raise InputError(f"unknown site generator {body.generator!r}", hint=f"use one of: {', '.join(GENERATORS)}")
    return body


@router.post(
    "/v1/documents",
    status_code=202,
    response_model=JobStarted,
    summary="Ingest uploaded files (multipart) or a server-side path (JSON) as a background job",
    openapi_extra={"requestBody": _BODY},
)
async def ingest(request: Request, user: Admin, svc: Svc) -> JobStarted:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        job = svc.jobs.ingest_uploads(await _uploads(request))
    elif kind == "application/json" or kind.endswith("+json"):
        body = await _path(request)
        job = svc.jobs.ingest_path(body.path, base_url=body.base_url, generator=body.generator)
    else:
        raise InputError(
            f"unsupported content type {kind or '(none)'}",
            hint='upload files as multipart/form-data, or send JSON {"path": "..."}',
        )
    return JobStarted(job_id=job.id, status=job.status)


@router.get("/v1/jobs/{job_id}", response_model=JobOut, summary="An ingestion job: status, progress, report")
async def job(job_id: str, user: Admin, svc: Svc) -> Any:
    return JobOut.model_validate(job_view(svc.jobs.get(job_id)))


@router.get("/v1/documents", response_model=DocumentList, summary="The ingested documents")
async def list_documents(user: Admin, svc: Svc) -> DocumentList:
    documents = await asyncio.to_thread(svc.components.corpus.documents)  # may be a PostgreSQL round trip
    return DocumentList(
        data=[DocumentOut(source=d.source, chunks=d.chunk_count, ingested_at=d.ingested_at) for d in documents]
    )


@router.delete(
    "/v1/documents/{source:path}", response_model=DocumentDeleted, summary="Remove a document and its chunks"
)
async def delete_document(source: str, user: Admin, svc: Svc) -> DocumentDeleted:
    roots = await asyncio.to_thread(svc.components.corpus.remove_source, source)
    if not roots:
        raise NotFoundError(f"no document {source!r}", hint="GET /v1/documents lists them")
    for root in roots:
        svc.jobs.forget_upload(root, source)
    return DocumentDeleted(source=source, documents=len(roots))
