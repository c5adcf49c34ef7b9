"""First-stage retrieval: lexical + dense lists from a passage index, fused."""

from anaphora.retrieval.embedded import EmbeddedPassageIndex
from anaphora.retrieval.fusion import weighted_rrf
from anaphora.retrieval.hybrid import HybridRetriever
from anaphora.retrieval.indexes import IndexCache

__all__ = ["EmbeddedPassageIndex", "HybridRetriever", "IndexCache", "weighted_rrf"]
