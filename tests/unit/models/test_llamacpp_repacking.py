"""Weight repacking of the in-process model: off by default on a CPU that lists AMX (SIGILL under hypervisors)."""

from pathlib import Path

from anaphora.models.llamacpp import cpu_advertises_amx, repacks_weights


def test_amx_is_read_from_the_cpu_flags(tmp_path: Path) -> None:
    amx = tmp_path / "amx"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f amx_bf16 amx_tile amx_int8\n")
    plain = tmp_path / "plain"
    plain.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n")
    assert cpu_advertises_amx(amx)
    assert not cpu_advertises_amx(plain)
    assert not cpu_advertises_amx(tmp_path / "missing")


def test_auto_repacks_only_without_amx_and_the_setting_overrides() -> None:
    assert repacks_weights("auto", amx=False)
    assert not repacks_weights("auto", amx=True)
    assert repacks_weights("on", amx=True)
    assert not repacks_weights("off", amx=False)
