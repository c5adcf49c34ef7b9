"""Multi-turn evaluation: retrieval, rewrite fidelity and answer checks on task files."""

from anaphora.evaluation.answers import replay_answers, score_answers
from anaphora.evaluation.retrieval import QUERY_SOURCES, replay, score
from anaphora.evaluation.retrieval_half import RetrievalHalf, retrieval_half
from anaphora.evaluation.rewrite import replay_rewrites, score_rewrites
from anaphora.evaluation.tasks import Task, load_tasks

__all__ = [
    "QUERY_SOURCES",
    "RetrievalHalf",
    "Task",
    "load_tasks",
    "replay",
    "replay_answers",
    "replay_rewrites",
    "retrieval_half",
    "score",
    "score_answers",
    "score_rewrites",
]
