"""The one loader of chat models, embedders and rerankers: built-ins declared in pyproject.toml the way a package
declares its own, found even where the installed metadata predates them, and a package's scheme found through a
real installed distribution (a .dist-info folder on sys.path)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from anaphora.backends import CHAT_MODELS, EMBEDDERS, KINDS, RERANKERS
from anaphora.embeddings import HashingEmbedder, load_embedder
from anaphora.errors import ConfigurationError
from anaphora.models import FakeChatModel, load_chat_model
from anaphora.rerank import NoModelReranker, load_reranker
from anaphora.settings import Settings
from tests.conftest import ROOT

pytestmark = pytest.mark.unit


def test_the_built_ins_are_the_entry_points_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    for kind in KINDS:
        assert declared[kind.group] == dict(kind.builtins), kind.group


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.what)
def test_every_built_in_factory_imports(kind) -> None:
    for name, entry in kind.available().items():
        if name in kind.builtins:
            assert callable(entry.load()), name


def install_package(site: Path, monkeypatch: pytest.MonkeyPatch, entry_points: str) -> None:
    """A distribution 'anaphora-extras' with ``entry_points``, installed in ``site`` and found by importlib."""
    info = site / "anaphora_extras-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: anaphora-extras\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    (site / "anaphora_extras.py").write_text(
        "from anaphora.embeddings import HashingEmbedder\n"
        "def tiny(argument, settings):\n"
        "    return HashingEmbedder(int(argument or 8))\n"
        "def hijack(argument, settings):\n"
        "    raise AssertionError('a package must not replace a built-in')\n"
    )
    monkeypatch.syspath_prepend(str(site))


def test_a_package_adds_a_scheme_and_cannot_take_a_built_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_package(
        tmp_path / "site",
        monkeypatch,
        "[anaphora.embedders]\ntiny = anaphora_extras:tiny\nhashing = anaphora_extras:hijack\n",
    )
    assert "tiny" in EMBEDDERS.available()
    tiny = load_embedder(Settings(data_dir=tmp_path, embedder="tiny:16"))
    assert isinstance(tiny, HashingEmbedder) and tiny.dim == 16
    assert isinstance(load_embedder(Settings(data_dir=tmp_path, embedder="hashing")), HashingEmbedder)


@pytest.mark.parametrize(
    ("load", "spec", "listed"),
    [
        (lambda s: load_chat_model(s.models), "nope", "fake"),
        (load_embedder, "word2vec:/x", "minilm"),
        (lambda s: load_reranker(s.models), "colbert:/x", "cross-encoder"),
    ],
)
def test_an_unknown_scheme_names_the_registered_ones(tmp_path: Path, load, spec: str, listed: str) -> None:
    field = {"nope": "chat_model", "word2vec:/x": "embedder", "colbert:/x": "reranker"}[spec]
    with pytest.raises(ConfigurationError) as caught:
        load(Settings(data_dir=tmp_path, **{field: spec}))
    assert repr(spec) in caught.value.message and listed in (caught.value.hint or "")


def test_the_defaults_of_the_tests_load_through_the_registry(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, chat_model="fake", embedder="hashing", reranker="none")
    assert isinstance(load_chat_model(settings.models), FakeChatModel)
    assert isinstance(load_embedder(settings), HashingEmbedder)
    assert isinstance(load_reranker(settings.models), NoModelReranker)
    assert {CHAT_MODELS.group, EMBEDDERS.group, RERANKERS.group} == {k.group for k in KINDS}
