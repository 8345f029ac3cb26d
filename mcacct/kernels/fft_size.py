"""The lengths of the real transforms that correlate a column of ``k`` taps with ``n`` rows.

Every FFT path of the sliding sums reads its length here, and so does the float error bound that must use the same
length (:mod:`mcacct.engine.systematic`). A length ``N >= n + k - 1`` lets no wrap-around of the circular correlation
reach a row ``< n``; both functions take ``N >= n + k``. Numbers in, numbers out.
"""

from __future__ import annotations

__all__ = ["sliding_fft_size", "screen_fft_size"]


def _smallest(need: int, factors: tuple[int, ...]) -> int:
    sizes = []
    for m in factors:
        while m < need:
            m *= 2
        sizes.append(m)
    return min(sizes)


def sliding_fft_size(iterations: int, taps: int) -> int:
    """``N`` of the float64 sliding sums (:func:`mcacct.kernels.sliding.sliding_dot_t`, ``"fft"``): the smallest power
    of two that is at least ``n + k`` (the radix-2 form Higham's bound of assumption (A1), docs/pld.md, covers)."""
    return _smallest(int(iterations) + int(taps), (1,))


def screen_fft_size(iterations: int, taps: int, radix2: bool = False) -> int:
    """``N`` of the float32 screen (:func:`mcacct.kernels.block_terms.noise_block_maxima_t`): the smallest power of
    two times 1, 3, 5 or 15 that is at least ``n + k`` (at n = 7200, k = 256: 7680 = 15 2^9 instead of 8192, about
    4 us less per draw on one core; the measured errors of XLA:CPU's transforms of these lengths are as far inside
    (A1) as those of powers of two, tests/kernels/test_settle.py); with ``radix2``, the smallest power of two (the
    engine's choice on GPUs: the lengths Higham's theorem covers for a radix-2 transform, and those the suite's
    measurement checks on the device; another library may split them into other radices)."""
    return _smallest(int(iterations) + int(taps), (1,) if radix2 else (1, 3, 5, 15))
