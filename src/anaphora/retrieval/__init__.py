"""First-stage retrieval: BM25 + dense vectors, fused."""

from anaphora.retrieval.fusion import weighted_rrf
from anaphora.retrieval.hybrid import HybridRetriever
from anaphora.retrieval.indexes import IndexCache

__all__ = ["HybridRetriever", "IndexCache", "weighted_rrf"]
