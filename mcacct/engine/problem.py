r"""The problem and the chunk plan: what every run of the engine is defined by.

A :class:`Problem` fixes the pair ``(P, Q)`` up to ``sigma``: a scheme (any
:class:`mcacct.schemes.base.AccountedScheme`), the strategy ``C`` and the kernel (precision, sliding-sum
method, recursion). A run of ``num_samples`` samples is cut into chunks of ``chunk_size`` samples; chunk ``c``
uses ``fold_in(key, c)``, and a chunk is cut into cache-sized blocks keyed :func:`block_keys`. Results
therefore depend on ``(key, chunk_size)`` only, never on how chunks are spread over devices, processes or jobs,
and peak memory depends on ``chunk_size``, not on ``num_samples``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp

from mcacct.engine.losses import direction_losses
from mcacct.kernels.blocks import lanes_target, map_blocks
from mcacct.schemes.base import AccountedScheme
from mcacct.schemes.mechanism import KernelOptions, Mechanism
from mcacct.strategies.banded import BandedToeplitz
from mcacct.core.precision import float64
from mcacct.core.validate import LOSS_KERNELS, check_choice, check_int

__all__ = ["Problem", "check_problem", "MAX_ITERATIONS", "DEFAULT_CHUNK_SIZE", "auto_chunk_size", "block_size",
           "batch_blocks", "BATCH_ELEMENTS",
           "block_keys", "chunk_losses",
           "rng_identity"]

#: The longest horizon ``n`` a problem may have, ``2^20``. The engine holds about
#: :data:`AUTO_CHUNK_BYTES_PER_ELEMENT` bytes per sample and round and runs blocks of at least 16 samples
#: (:func:`block_size`), so one block at this ``n`` already takes 2 GiB, and its kernels index rounds (and
#: rounds x samples) with int32; longer horizons overflowed them (``--iterations 1e12``: an int32 overflow
#: inside a kernel) or asked for terabytes.
MAX_ITERATIONS = 1 << 20
#: Samples per chunk on CPU (and where an accelerator does not report its memory): the blocks of a chunk run one
#: after another there, so a larger chunk buys nothing.
DEFAULT_CHUNK_SIZE = 4096
#: Largest chunk :func:`auto_chunk_size` picks: the largest the §7.4 probe was measured at on an H200
#: (why: benchmarks/results/design_choices.md).
AUTO_CHUNK_MAX = 131072
#: Peak device bytes per (sample x round) of a chunk that :func:`auto_chunk_size` budgets for: about 3x the
#: largest single buffer seen (72.8 GiB at chunk 262144, n = 7200, the truncated 4-sigma ladder on an H200, which
#: ran out of memory there; 41 bytes per element).
AUTO_CHUNK_BYTES_PER_ELEMENT = 128
#: Elements (samples x rounds) of the blocks whose losses an accelerator computes in one batch where the mechanism
#: draws part of a block ahead (:func:`mcacct.engine.runner.map_chunk_blocks`): 2^29, about the chunk
#: :func:`auto_chunk_size` gives an H100 at n = 7200 (65,536 samples)
BATCH_ELEMENTS = 1 << 29


@float64
@dataclass(frozen=True)
class Problem:
    """Everything that defines the pair (P, Q) except ``sigma``: scheme, strategy and kernel precision.

    ``scheme`` is any :class:`mcacct.schemes.base.AccountedScheme` (e.g. :class:`BMinSep`). ``loss_kernel``
    (``"auto"``, ``"fused"``, ``"unfused"``) picks the kernel of the shared-draw ladder
    (:func:`mcacct.engine.kernel_choice.resolve_loss_kernel`). ``skip_zero`` (default ``True``): contributions that
    are provably 0 at the run's epsilons are not computed (:mod:`mcacct.kernels.shortcuts`; the sums are the same
    bit for bit, the histogram an upper bound); ``False`` computes every loss, for A/B runs.
    """

    scheme: AccountedScheme
    strategy: BandedToeplitz = BandedToeplitz()
    dtype: str = "float64"
    dot_method: str = "auto"
    recursion: str = "auto"
    loss_kernel: str = "auto"
    skip_zero: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, AccountedScheme):
            raise TypeError(f"scheme must be a sampling scheme (an AccountedScheme such as mcacct.BMinSep(...)); got "
                            f"{type(self.scheme).__name__}")
        try:
            check_int("iterations", self.scheme.iterations, low=1, high=MAX_ITERATIONS)
        except ValueError as err:
            raise ValueError(f"{err} (the engine holds about {AUTO_CHUNK_BYTES_PER_ELEMENT} bytes per sample and "
                             "round in blocks of at least 16 samples, 2 GiB per block at the limit, and indexes "
                             "rounds with int32)") from None
        self.scheme.check_strategy(self.strategy)
        check_choice("loss_kernel", self.loss_kernel, LOSS_KERNELS)
        if not isinstance(self.skip_zero, bool):
            raise TypeError(f"skip_zero must be True or False; got {self.skip_zero!r}")
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32'; got {self.dtype!r}")

    def mechanism(self) -> Mechanism:
        """The scheme's :class:`~mcacct.schemes.mechanism.Mechanism` bound to this problem's strategy and kernel
        options (``dtype``, ``dot_method``, ``recursion``): what the engine runs.

        Returns
        -------
        Mechanism
            ``scheme.mechanism(strategy, KernelOptions(jnp.dtype(dtype), dot_method, recursion))``.
        """
        return self.scheme.mechanism(self.strategy, KernelOptions(jnp.dtype(self.dtype), self.dot_method,
                                                                  self.recursion))


def check_problem(name: str, problem) -> Problem:
    """``problem`` if it is a :class:`Problem`; ``TypeError`` naming ``name`` otherwise (a bare scheme is the
    usual mistake: wrap it, ``Problem(scheme, strategy)``).

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    problem : object
        The value to check.

    Returns
    -------
    Problem
        ``problem`` itself.

    Raises
    ------
    TypeError
        Naming ``name`` and the type received, if ``problem`` is not a :class:`Problem`.
    """
    if not isinstance(problem, Problem):
        hint = (" (a scheme: wrap it as mcacct.Problem(scheme, strategy))" if isinstance(problem, AccountedScheme)
                else "")
        raise TypeError(f"{name} must be a mcacct.Problem; got {type(problem).__name__}{hint}")
    return problem


@float64
def block_size(problem: Problem, chunk_size: int) -> int:
    r"""Samples per block: :func:`mcacct.kernels.blocks.lanes_target` (``2**18 / n`` within ``[16, 4096]``, at least
    ``min(256, 2**23 / n)``), raised to the mechanism's ``block_floor`` (a scheme whose draws are sequential in the
    rounds, e.g. truncation's counts, vectorises over a block), and at most ``chunk_size``. Depends only on the
    problem and the chunk size, never on the backend.

    The target :math:`t = \max(\mathrm{lanes\_target}(n), \mathrm{block\_floor})` is rounded down to a power of
    two: the block size is :math:`\min(2^{\lfloor \log_2 t \rfloor}, \mathrm{chunk\_size})`.

    Parameters
    ----------
    problem : Problem
        The problem (its horizon ``n`` and its mechanism's ``block_floor``).
    chunk_size : int
        Samples per chunk, ``>= 1``.

    Returns
    -------
    int
        Samples per block.
    """
    target = max(lanes_target(problem.scheme.iterations), int(problem.mechanism().block_floor))
    return min(1 << (target.bit_length() - 1), chunk_size)


def batch_blocks(problem: Problem, bsize: int) -> int:
    """Blocks of ``bsize`` samples per batch of :func:`mcacct.engine.runner.map_chunk_blocks`: the largest power of
    two ``k`` with ``k n bsize <= BATCH_ELEMENTS`` (at least 1). Depends only on the problem and the block size.

    Parameters
    ----------
    problem : Problem
        The problem (its horizon ``n``).
    bsize : int
        Samples per block.

    Returns
    -------
    int
    """
    fits = max(1, BATCH_ELEMENTS // (problem.scheme.iterations * int(bsize)))
    return 1 << (fits.bit_length() - 1)


@float64
def block_keys(key: jax.Array, problem: Problem, chunk_size: int) -> jax.Array:
    """Keys of the blocks of one chunk: block ``j`` uses ``fold_in(chunk_key, j)``.

    Parameters
    ----------
    key : jax.Array
        The chunk's key (``fold_in(run_key, c)`` for chunk ``c``).
    problem : Problem
        The problem (for :func:`block_size`).
    chunk_size : int
        Samples per chunk.

    Returns
    -------
    jax.Array
        The ``ceil(chunk_size / block_size)`` block keys, stacked along the first axis.
    """
    n_blocks = -(-chunk_size // block_size(problem, chunk_size))
    return jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(n_blocks, dtype=jnp.uint32))


@float64
@partial(jax.jit, static_argnames=("problem", "chunk_size", "direction"))
def chunk_losses(key: jax.Array, sigma, problem: Problem, chunk_size: int, direction: str = "remove") -> jax.Array:
    """Privacy losses of one chunk (:func:`mcacct.engine.losses.direction_losses`): ``ln P/Q`` for y ~ P
    (``"remove"``), ``ln Q/P`` for y ~ Q (``"add"``).

    A chunk is made of blocks of :func:`block_size` samples with keys :func:`block_keys`, so the numbers
    depend only on ``(key, chunk_size)``. On CPU the blocks run one after another (``lax.map``: a block's
    ``(n, block)`` arrays stay in cache; benchmarks/results/design_choices.md); on accelerators they are
    batched with ``vmap``.

    Parameters
    ----------
    key : jax.Array
        The chunk's key.
    sigma : float or jax.Array
        The noise multiplier.
    problem : Problem
        The problem (static under ``jit``).
    chunk_size : int
        Samples of the chunk (static).
    direction : {"remove", "add"}, default "remove"
        Which direction's losses (static).

    Returns
    -------
    jax.Array
        Shape ``(chunk_size,)``, the kernel's dtype: the losses of the chunk's samples (the last block is cut).
    """
    bsize = block_size(problem, chunk_size)
    mechanism = problem.mechanism()

    def one_block(k):
        return direction_losses(mechanism, k, sigma, bsize, direction)

    out = map_blocks(one_block, block_keys(key, problem, chunk_size))
    return out.reshape(-1)[:chunk_size]


def auto_chunk_size(problem: Problem, device: jax.Device | None = None) -> int:
    r"""The chunk size ``chunk_size="auto"`` stands for on ``device`` (default: the first local device).

    On CPU :data:`DEFAULT_CHUNK_SIZE`. On an accelerator, which runs a chunk's blocks as one batch, the largest
    power of two ``c <= AUTO_CHUNK_MAX`` (and ``>= 256``) with

    .. math:: c \cdot n \cdot \beta \le 0.9\, L,

    where ``n`` is the problem's number of rounds, ``beta`` :data:`AUTO_CHUNK_BYTES_PER_ELEMENT` and ``L`` the
    device's ``bytes_limit`` (``memory_stats()``; :data:`DEFAULT_CHUNK_SIZE` where the device reports none).
    A GPU runs the count chain's sequential rounds latency-bound, and a wider chunk fills it
    (benchmarks/results/design_choices.md).

    The chunk size fixes which samples a key draws (:func:`block_keys`), so the resolved number, not
    ``"auto"``, is what plans, job files and results record; resuming reads it from there.

    Parameters
    ----------
    problem : Problem
        The problem (its number of rounds ``n``).
    device : jax.Device, optional
        The device (default ``jax.local_devices()[0]``).

    Returns
    -------
    int
        :data:`DEFAULT_CHUNK_SIZE` on CPU or without a memory limit; else
        :math:`\max(256, \min(\mathrm{AUTO\_CHUNK\_MAX}, 2^{\lfloor \log_2 f \rfloor}))` with
        :math:`f = \max(1, \lfloor 0.9 L \rfloor // (n \beta))`.
    """
    device = device or jax.local_devices()[0]
    if device.platform == "cpu":
        return DEFAULT_CHUNK_SIZE
    try:
        limit = int((device.memory_stats() or {}).get("bytes_limit", 0))
    except Exception:  # noqa: BLE001 -- backends without memory statistics
        limit = 0
    if limit <= 0:
        return DEFAULT_CHUNK_SIZE
    fits = int(0.9 * limit) // (problem.scheme.iterations * AUTO_CHUNK_BYTES_PER_ELEMENT)
    return max(256, min(AUTO_CHUNK_MAX, 1 << max(fits, 1).bit_length() - 1))


def rng_identity() -> str:
    """The random-number generator the keys of a run draw from: JAX's default PRNG implementation and whether
    threefry bits are generated in the partitionable layout (the two change every draw of a given key).
    Job and plan files record it; resume and merge refuse files of another generator.

    Returns
    -------
    str
        ``"jax.random:IMPL:LAYOUT"``, ``LAYOUT`` being ``"partitionable"`` or ``"classic"``.
    """
    impl = str(jax.config.jax_default_prng_impl)
    layout = "partitionable" if jax.config.jax_threefry_partitionable else "classic"
    return f"jax.random:{impl}:{layout}"
