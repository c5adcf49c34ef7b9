"""blas_threads caps the process's BLAS pool when components are built (0 leaves it alone)."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from anaphora.app import build_components
from anaphora.settings import Settings

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("isolated_env")]


def blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


@pytest.fixture(autouse=True)
def restore_blas():
    with threadpool_limits(limits=None):  # restores the pools' sizes afterwards
        threadpool_limits(limits=2, user_api="blas")
        yield


def test_blas_pool_is_capped_by_the_setting(tmp_path):
    if not blas_threads():
        pytest.skip("numpy uses no BLAS library that threadpoolctl can see")
    components = build_components(Settings(data_dir=tmp_path, embedder="hashing", chat_model="fake"))
    components.database.close()
    assert blas_threads() == {1}


def test_zero_leaves_the_pool_alone(tmp_path):
    if not blas_threads():
        pytest.skip("numpy uses no BLAS library that threadpoolctl can see")
    components = build_components(Settings(data_dir=tmp_path, embedder="hashing", chat_model="fake", blas_threads=0))
    components.database.close()
    assert blas_threads() == {2}
