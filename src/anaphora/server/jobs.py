"""Ingestion jobs started over HTTP: one at a time, off the event loop, with progress and the ingest report.

Uploaded files are stored under ``<data_dir>/uploads/<job id>/`` and ingested from there, so that folder is their
root in the corpus. A new upload of a file name replaces the earlier upload of that name (it is reported as
updated), instead of indexing a second copy. Jobs live in this process's memory; the most recent
:data:`KEEP_JOBS` are kept.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from anaphora.errors import NotFoundError
from anaphora.ingest import Ingestor, IngestReport
from anaphora.ingest.sources import Sources, is_site
from anaphora.store.protocols import DocumentRegistry

log = logging.getLogger("anaphora.server")
KEEP_JOBS = 100
Status = Literal["queued", "running", "done", "failed"]


@dataclass
class Job:
    id: str
    created_at: float
    status: Status = "queued"
    done: int = 0
    total: int = 0
    report: IngestReport | None = None
    rejected: list[tuple[str, str]] = field(default_factory=list)  # uploads refused before ingestion
    error: str | None = None
    finished_at: float | None = None

    def progress(self, done: int, total: int) -> None:  # called from the ingestion thread
        self.done, self.total = done, total


MAX_NAME_BYTES = 255  # the limit of ext4, XFS, btrfs, APFS and NTFS on one path component


_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _unfit_in_name(char: str) -> bool:
    """A character a file name shown in a listing, a log line or a citation must not hold: C0 and C1 controls
    (U+0085 NEXT LINE among them), line and paragraph separators, lone surrogates and bidirectional controls, which
    break lines or make a name display as another."""
    return unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp") or char in _BIDI_CONTROLS


def upload_name_problem(name: str) -> str | None:
    """Why an uploaded file's (base) name cannot be stored as given, or None."""
    if not name or name.startswith("."):
        return "the file name is empty or hidden (starts with '.')"
    if bad := next((c for c in name if _unfit_in_name(c)), None):
        return f"the file name holds a control or line-break character (U+{ord(bad):04X}); rename the file"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"the file name is longer than {MAX_NAME_BYTES} bytes; rename the file"
    return None


@dataclass
class Upload:
    filename: str
    data: bytes


class IngestJobs:
    def __init__(
        self,
        ingestor: Ingestor,
        corpus: DocumentRegistry,
        uploads: Path,
        sources: Sources | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        """``sources``: records ingested folders (their published URLs) and crawls sites given by URL; ``after``
        is called when a job has written its passages (the answer units follow in the background)."""
        self.ingestor = ingestor
        self.corpus = corpus
        self.uploads = uploads
        self.sources = sources
        self.after = after
        self._jobs: dict[str, Job] = {}
        self._one_at_a_time = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no ingestion job {job_id!r}", hint="use the job_id that POST /v1/documents returned")
        return job

    def _new(self) -> Job:
        job = Job(uuid.uuid4().hex[:12], time.time())
        self._jobs[job.id] = job
        finished = [j for j in self._jobs.values() if j.status in ("done", "failed")]
        for old in finished[: max(0, len(self._jobs) - KEEP_JOBS)]:
            del self._jobs[old.id]
        return job

    def ingest_path(self, path: str, **published: Any) -> Job:
        """Ingest a file or folder on the server, pruning documents whose files left that folder, or crawl (and
        re-sync) the site at a URL. ``published``: base_url, generator (:meth:`Sources.record_folders`)."""
        job = self._new()
        self._start(job, self._run_path(job, path, published))
        return job

    def ingest_uploads(self, uploads: Sequence[Upload]) -> Job:
        job = self._new()
        folder = self.uploads / job.id
        folder.mkdir(parents=True, exist_ok=True)
        names: set[str] = set()
        for upload in uploads:
            name = Path(upload.filename.replace("\\", "/")).name
            if problem := upload_name_problem(name):
                job.rejected.append((upload.filename, problem))
            elif name in names:
                job.rejected.append((upload.filename, "the same file name was uploaded twice in this request"))
            else:
                try:
                    (folder / name).write_bytes(upload.data)
                except OSError as exc:  # a name this file system refuses for a reason of its own
                    job.rejected.append((upload.filename, f"cannot be stored under this name: {exc.strerror}"))
                else:
                    names.add(name)
        self._start(job, self._run_uploads(job, folder, names))
        return job

    def _start(self, job: Job, work) -> None:
        task = asyncio.get_running_loop().create_task(self._guarded(job, work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _guarded(self, job: Job, work) -> None:
        async with self._one_at_a_time:
            job.status = "running"
            try:
                job.report = await work
                job.status = "done"
                if self.after is not None:
                    self.after()
            except Exception as exc:
                log.error("ingestion job %s failed", job.id, exc_info=exc)
                job.error, job.status = f"{type(exc).__name__}: {exc}", "failed"
            finally:
                job.finished_at = time.time()

    async def _run_path(self, job: Job, path: str, published: dict[str, Any]) -> IngestReport:
        if self.sources is not None and is_site(path):
            return await asyncio.to_thread(self.sources.site, path)  # its own event loop, in the worker thread
        report = await asyncio.to_thread(self.ingestor.run, [path], progress=job.progress)
        if self.sources is not None:
            await asyncio.to_thread(self.sources.record_folders, [path], report, **published)
        return report

    async def _run_uploads(self, job: Job, folder: Path, names: set[str]) -> IngestReport:
        root = str(folder.resolve())
        documents = await asyncio.to_thread(self.corpus.documents)  # may be a PostgreSQL round trip
        earlier = [d for d in documents if d.source in names and d.root != root and self._is_upload(d.root)]
        report = await asyncio.to_thread(self._replace, job, folder, earlier)
        for name, reason in job.rejected:
            report.skipped.append((name, reason))
        prefix = root + "/"
        report.skipped = [(p.removeprefix(prefix), reason) for p, reason in report.skipped]
        report.warnings = [(p.removeprefix(prefix), warning) for p, warning in report.warnings]
        return report

    def _replace(self, job: Job, folder: Path, earlier: list) -> IngestReport:
        """Drop the earlier uploads of the same names first (so chunk ids stay theirs), then ingest."""
        self.corpus.remove_documents((d.root, d.source) for d in earlier)
        report = self.ingestor.run([folder], progress=job.progress)
        replaced = {d.source for d in earlier}
        report.updated.extend(s for s in report.added if s in replaced)
        report.added = [s for s in report.added if s not in replaced]
        for document in earlier:
            self._unlink(Path(document.root) / document.source)
        return report

    def _is_upload(self, root: str) -> bool:
        return Path(root).parent == self.uploads.resolve()

    def forget_upload(self, root: str, source: str) -> None:
        """After a document was deleted: remove its uploaded file too, if it was uploaded."""
        if self._is_upload(root):
            self._unlink(Path(root) / source)

    @staticmethod
    def _unlink(path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
            if path.parent.is_dir() and not any(path.parent.iterdir()):
                shutil.rmtree(path.parent, ignore_errors=True)
        except OSError as exc:
            log.warning("could not remove the uploaded file %s: %s", path, exc)

    async def drain(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for queued and running jobs; returns how many are left."""
        if not self._tasks:
            return 0
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return len(pending)


def job_view(job: Job) -> dict[str, Any]:
    report = job.report
    return {
        "object": "ingest_job",
        "id": job.id,
        "status": job.status,
        "progress": {"done": job.done, "total": job.total},
        "created_at": job.created_at,
        "finished_at": job.finished_at,
        "error": job.error,
        "report": None
        if report is None
        else {
            "added": report.added,
            "updated": report.updated,
            "unchanged": report.unchanged,
            "removed": report.removed,
            "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
            "warnings": [{"path": p, "warning": w} for p, w in report.warnings],
            "chunks_written": report.chunks_written,
            "seconds": report.seconds,
        },
    }
