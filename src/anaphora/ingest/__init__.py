"""Ingestion: parse files, chunk them, embed the chunks, and store them idempotently."""

from anaphora.ingest.ingestor import Ingestor, IngestReport
from anaphora.ingest.parsers import SUPPORTED_SUFFIXES, parse_file

__all__ = ["SUPPORTED_SUFFIXES", "IngestReport", "Ingestor", "parse_file"]
