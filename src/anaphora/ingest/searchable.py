"""An ingestor whose run ends with what it wrote searchable, so the search indexes are never rebuilt by a turn."""

from __future__ import annotations

from typing import Any

from anaphora.ingest.ingestor import Ingestor, IngestReport
from anaphora.store.protocols import PassageIndex


class SearchableIngestor(Ingestor):
    """After writing, brings ``index`` up to date in the ingesting thread (a server job's worker, the CLI): turns
    keep searching the previous generation meanwhile, and a job reported done is searchable."""

    def __init__(self, *args: Any, index: PassageIndex, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.index = index

    def run(self, *args: Any, **kwargs: Any) -> IngestReport:
        report = super().run(*args, **kwargs)
        self.index.warm_up()
        return report
