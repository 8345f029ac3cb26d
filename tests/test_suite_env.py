"""tests/suite_env.py's reading of whether XLA:CPU emits fused multiply-adds (the premise of test_contract's stored
values): from the CPU's flags, the ISA cap in ``XLA_FLAGS`` and the machine."""

import pytest
from suite_env import xla_cpu_fma


@pytest.mark.parametrize("flags_line,xla_flags,want", [
    ("flags\t\t: fpu sse2 avx avx2 fma f16c", "", True),
    ("flags\t\t: fpu sse2 avx", "", False),                                     # no fma: AVX alone
    ("flags\t\t: fpu sse2 avx avx2 fma", "--xla_cpu_max_isa=AVX", False),       # capped below AVX2
    ("flags\t\t: fpu sse2 avx avx2 fma", "--xla_cpu_max_isa=sse4_2 --foo", False),
    ("flags\t\t: fpu sse2 avx avx2 fma", "--xla_cpu_max_isa=AVX512", True),
    ("flags\t\t: fpu sse2 avx fma4", "", False),                                 # AMD's fma4 is not fma
])
def test_fma_from_cpu_flags_and_isa_cap(tmp_path, flags_line, xla_flags, want):
    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\n{flags_line}\n")
    assert xla_cpu_fma(xla_flags, str(info), "x86_64") is want


def test_fma_on_arm_and_where_the_flags_cannot_be_read(tmp_path):
    assert xla_cpu_fma("", str(tmp_path / "missing"), "aarch64") is True
    assert xla_cpu_fma("", str(tmp_path / "missing"), "x86_64") is True          # unknown: taken as present
