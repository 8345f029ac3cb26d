r"""One call from a privacy target to a certified noise multiplier: :func:`get_noise_multiplier`.

Four cases, by what the caller gives:

* **DP-SGD with Poisson sampling** (``sampling_prob`` and ``steps``, no ``min_sep``): the deterministic FFT PLD
  accountant (:func:`mcacct.pld.pld_calibrate`, pessimistic discretisation), in seconds; no key.
* **A scheme with an exact PLD** (``method="auto"``, the default): b-min-sep with ``min_sep=1`` and cyclic
  Poisson with a public partition and complete columns (each scheme's ``exact_pld``) go to the same PLD
  accountant, for the strategy given or the default one below. ``method="monte-carlo"`` forces Monte Carlo.
* **b-min-sep BandMF** (``min_sep=b``; ``max_batch_size`` adds App. D's truncation; or any ``problem``, or a
  ``jax_privacy.batch_selection`` object through :func:`mcacct.from_jax_privacy`): Monte Carlo
  Estimate-Verify-Release (Dong & Ganesh 2026, arXiv:2602.09338, App. A, Alg. 5). The strategy is ``c_col`` when
  given, else mcacct's banded Toeplitz C with ``bands = min_sep`` (a jax-privacy cyclic Poisson or balls-in-bins
  selection: its cycle length) that minimises the mean squared error of the prefix sums
  (:func:`mcacct.strategies.optimize_banded_toeplitz`, ``||c|| = 1``). Train with the C the result names
  (``NoiseMultiplier.strategy``): the certificate is for that C.

A Monte Carlo calibration can take hours: it needs an explicit ``key``, and it states its expected cost before it
starts (:func:`mcacct.evr.cost.estimate_cost`: a probe of a few chunks). ``dry_run=True`` returns that
:class:`~mcacct.evr.cost.CostEstimate` and runs nothing else.

The released :class:`NoiseMultiplier` is a certificate: ``sigma`` is :math:`(\varepsilon, \delta)`-DP with
``delta <= target_delta``. For Monte Carlo, ``delta`` is Alg. 5's overall delta
:math:`\delta + q(1-\delta)` plus the proven systematic terms, where ``failure_probability`` :math:`q` bounds the
chance that a noise multiplier that is *not* :math:`(\varepsilon, \delta)`-DP passes verification
(Theorem A.1); for the PLD accountant it is 0.

**Opacus' call** (issue #41): ``get_noise_multiplier(target_epsilon=..., target_delta=..., sample_rate=...,
steps=None, epochs=None, accountant=None, epsilon_tolerance=...)`` works as a drop-in, and ``float(result)`` is
the noise multiplier; the translation of Opacus' arguments is :mod:`mcacct.interop.opacus`.
"""

from __future__ import annotations

import inspect
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import jax

from mcacct.engine.problem import Problem
from mcacct.evr.calibrate import CalibrationResult, calibrate, check_ladder_options
from mcacct.evr.cost import CostEstimate, estimate_cost
from mcacct.statistics import confidence as evr
from mcacct.interop.opacus import (OPACUS_KEYWORDS, check_accountant, check_epsilon_tolerance, check_keywords,
                                   opacus_sampling_and_steps)
from mcacct.core.validate import check_choice, check_count, check_prob, check_real
from mcacct.core.platform import ensure_compilation_cache
from mcacct.core.precision import float64
from mcacct.strategies import default
from mcacct.strategies.default import default_strategy

__all__ = ["NoiseMultiplier", "get_noise_multiplier", "default_strategy"]

#: The options :func:`mcacct.calibrate` takes through ``**calibrate_options`` (Monte Carlo only).
MONTE_CARLO_OPTIONS = tuple(n for n in inspect.signature(calibrate).parameters
                            if n not in ("problem", "epsilon", "delta", "key", "num_samples", "progress"))
#: The options of the PLD accountant (Poisson DP-SGD only).
PLD_OPTIONS = ("value_discretization_interval", "discretization")
#: ``method`` of :func:`get_noise_multiplier`: the PLD accountant wherever the scheme has an exact PLD (``auto``),
#: only there (``pld``), or Monte Carlo EVR in every case (``monte-carlo``).
METHODS = ("auto", "pld", "monte-carlo")


@float64
@dataclass(frozen=True)
class NoiseMultiplier:
    """A certified noise multiplier (:func:`get_noise_multiplier`); ``float(result)`` is ``sigma`` (Opacus'
    ``get_noise_multiplier`` returns a float).

    Attributes
    ----------
    sigma : float
        The noise multiplier: noise standard deviation over the sensitivity (``||c|| = 1`` for BandMF).
    epsilon, delta : float
        What ``sigma`` certifies: :math:`(\\varepsilon, \\delta)`-DP, ``delta <= target_delta``.
    target_delta : float
        The delta asked for.
    method : str
        ``"pld"`` (deterministic FFT accountant) or ``"monte-carlo"`` (Alg. 5).
    failure_probability : float
        Alg. 5's :math:`q` (already inside ``delta``); 0 for ``"pld"``.
    num_samples : int
        Monte Carlo samples per direction per candidate (0 for ``"pld"``).
    verified : bool
        ``False`` when no Monte Carlo candidate passed and the certified top (a Gaussian worst case) is returned.
    scheme, strategy : object
        What was calibrated (``strategy`` is ``None`` for ``"pld"``).
    seconds : float
        Wall time of the call.
    cost : CostEstimate or None
        The estimate stated before the Monte Carlo run.
    calibration : CalibrationResult or None
        The full Monte Carlo record (ladder, candidates, phases).
    """

    sigma: float
    epsilon: float
    delta: float
    target_delta: float
    method: str
    failure_probability: float
    num_samples: int
    verified: bool
    scheme: Any
    strategy: Any
    seconds: float
    cost: CostEstimate | None = None
    calibration: CalibrationResult | None = field(default=None, repr=False)

    def __float__(self) -> float:
        """``float(result)`` is ``sigma``, as Opacus' ``get_noise_multiplier`` returns (no ``__index__``: a noise
        multiplier is no integer)."""
        return float(self.sigma)

    def to_dict(self) -> dict:
        """Plain fields (scheme and strategy by ``repr``; the calibration record as its own dict).

        Returns
        -------
        dict
            The scalar fields as they are, ``scheme`` and ``strategy`` as ``repr`` strings (``strategy`` ``None``
            when absent), ``cost`` as a dict and ``calibration`` as its ``to_dict()`` (each ``None`` when absent).
        """
        out = {k: getattr(self, k) for k in ("sigma", "epsilon", "delta", "target_delta", "method",
                                             "failure_probability", "num_samples", "verified", "seconds")}
        out["scheme"], out["strategy"] = repr(self.scheme), None if self.strategy is None else repr(self.strategy)
        out["cost"] = None if self.cost is None else asdict(self.cost)
        out["calibration"] = None if self.calibration is None else self.calibration.to_dict()
        return out


def _sampling_prob(sampling_prob, batch_size, dataset_size, min_sep: int, truncated: bool = False) -> float:
    if sampling_prob is not None:
        if batch_size is not None:
            raise ValueError("give sampling_prob or batch_size (with dataset_size), not both")
        if dataset_size is not None and not truncated:
            raise ValueError("dataset_size does not apply with sampling_prob (it goes with batch_size, or with "
                             "max_batch_size for truncated b-min-sep)")
        return check_prob("sampling_prob", sampling_prob)
    if batch_size is None or dataset_size is None:
        raise ValueError("give sampling_prob, or batch_size with dataset_size (the expected batch size)")
    from mcacct.core.rates import sampling_prob_from_batch_size
    return sampling_prob_from_batch_size(batch_size, dataset_size, min_sep)


def _problem(steps, sampling_prob, batch_size, dataset_size, min_sep, c_col, max_batch_size, warm_start,
             batch_selection) -> Problem:
    from mcacct.strategies.banded import BandedToeplitz
    if batch_selection is not None:
        from mcacct.interop.jax_privacy import from_jax_privacy
        for name, v in (("sampling_prob", sampling_prob), ("steps", steps), ("min_sep", min_sep),
                        ("batch_size", batch_size), ("max_batch_size", max_batch_size),
                        ("warm_start", warm_start)):
            if v is not None:
                raise ValueError(f"{name} comes from batch_selection; do not give it as well")
        scheme = from_jax_privacy(batch_selection, dataset_size=dataset_size)
    else:
        n = check_count("steps", steps)
        b = check_count("min_sep", min_sep)
        p = _sampling_prob(sampling_prob, batch_size, dataset_size, b, truncated=max_batch_size is not None)
        warm_start = True if warm_start is None else warm_start
        if max_batch_size is None:
            from mcacct.schemes.bminsep import BMinSep
            scheme = BMinSep(p, b, n, warm_start=warm_start)
        else:
            from mcacct.schemes.truncated import TruncatedBMinSep
            if dataset_size is None:
                raise ValueError("dataset_size is required with max_batch_size (truncated b-min-sep counts the "
                                 "other examples)")
            scheme = TruncatedBMinSep(p, b, n, int(dataset_size), int(max_batch_size), warm_start=warm_start)
    # the bands of the default C: b-min-sep's separation, cyclic Poisson's and balls-in-bins' cycle length
    bands = int(scheme.summary().bands or 1)
    strategy = (BandedToeplitz(tuple(c_col)) if c_col is not None
                else default.default_strategy(scheme.iterations, bands))
    return Problem(scheme, strategy)


@float64
def get_noise_multiplier(target_epsilon: float, target_delta: float, sampling_prob: float | None = None,
                         steps: int | None = None, *, min_sep: int | None = None, batch_size: float | None = None,
                         dataset_size: int | None = None, c_col=None, max_batch_size: int | None = None,
                         warm_start: bool | None = None, batch_selection: Any = None, problem: Problem | None = None,
                         key: jax.Array | None = None, num_samples: int | None = None, dry_run: bool = False,
                         progress: bool = True, sample_rate: float | None = None, epochs: float | None = None,
                         accountant: str | None = None, epsilon_tolerance: float | None = None,
                         method: str = "auto", **calibrate_options) -> NoiseMultiplier | CostEstimate:
    r"""The smallest certified noise multiplier for :math:`(\varepsilon, \delta)`-DP, in one call.

    Parameters
    ----------
    target_epsilon : float
        :math:`\varepsilon \ge 0`.
    target_delta : float
        :math:`\delta \in (0, 1)`; the certified delta is at most this.
    sampling_prob : float, optional
        The sampling probability ``p`` in ``(0, 1]`` (b-min-sep: of an available example), or give
        ``batch_size`` and ``dataset_size`` (the expected batch size, :func:`mcacct.sampling_prob_from_batch_size`).
    steps : int, optional
        Training iterations ``n >= 1``.
    min_sep : int, optional
        b-min-sep's minimum separation ``b >= 1`` (also the bands of the default C). Without it (and without
        ``problem`` or ``batch_selection``): Poisson DP-SGD by the PLD accountant.
    c_col : sequence of float, optional
        The first column's non-zeros of C (default: the MSE-optimised banded Toeplitz C).
    max_batch_size : int, optional
        Truncated b-min-sep (App. D) with this ``B_max``; needs ``dataset_size``.
    warm_start : bool, optional
        Alg. 2's warm start of b-min-sep (``min_sep``): default True. Refused (``ValueError``) where it has no
        effect: Poisson DP-SGD (no ``min_sep``), a ``problem`` (its scheme fixes it) or a ``batch_selection``
        (its own ``warm_start`` field).
    batch_selection : jax_privacy.batch_selection object, optional
        The scheme from a jax-privacy batch selection (:func:`mcacct.from_jax_privacy`).
    problem : Problem, optional
        Any scheme and strategy of mcacct.
    key : jax.Array
        Required for Monte Carlo: the root ``jax.random`` key (the result is a function of it).
    num_samples : int, optional
        Samples per direction per candidate (default: the fewest for base delta = delta / 2).
    dry_run : bool, default False
        Return the :class:`~mcacct.evr.cost.CostEstimate` of the Monte Carlo run and run nothing else.
    progress : bool, default True
        The cost statement and progress on stderr.
    sample_rate : float, optional
        Opacus' name: the expected fraction of the data per step (batch size over dataset size), the
        *participation rate* :math:`r`, instead of ``sampling_prob`` (giving both, or ``sample_rate`` and
        ``batch_size``, is a ``ValueError``). Poisson DP-SGD: ``sampling_prob = sample_rate``. b-min-sep
        (``min_sep = b``): :math:`r` is the stationary rate :math:`1/(1/p + b - 1)` of the sampling probability
        :math:`p` of an available example, and :math:`p = r / (1 - r (b - 1)) > r` is its exact inverse
        (:func:`mcacct.interop.opacus.sampling_prob_from_sample_rate`); taking :math:`r` for :math:`p` would
        certify fewer participations than the training has (optimistic, unsound). ``sample_rate`` must be in
        ``(0, 1/b]``: no :math:`p \in (0, 1]` gives a larger rate.
    epochs : float, optional
        Opacus' alternative to ``steps``: ``steps = ceil(epochs / rate)``, rounded up (a quotient within a
        relative 1e-9 of an integer is that integer). ``epochs > 0``; the rate is ``sample_rate``, else
        ``batch_size / dataset_size``, else for Poisson DP-SGD ``sampling_prob``. Giving ``steps`` too is a
        ``ValueError``.
    accountant : {None, "pld", "prv"}, optional
        Opacus' accountant. ``None`` (the default, unlike Opacus' ``"rdp"``) keeps mcacct's choice; ``"pld"`` and
        ``"prv"`` (mcacct's PLD accountant is the analogue of Opacus' PRV accountant) give the same PLD
        calibration of Poisson DP-SGD. ``"rdp"`` and ``"gdp"`` are refused (``ValueError``): mcacct certifies with
        the PLD accountant, tighter than RDP and sound, unlike the GDP (central limit) approximation. With
        ``min_sep``, ``problem`` or ``batch_selection`` (Monte Carlo) any value but ``None`` is refused.
    epsilon_tolerance : float, optional
        Opacus' search tolerance: a positive real if given, and otherwise unused. mcacct's result is the
        smallest sigma it certifies on its own grid (PLD: :func:`mcacct.pld.pld_calibrate`'s ladder bisection to
        a relative 1e-4, rounded up; Monte Carlo: the ladder), always certified: it is ``target_epsilon``-DP
        with a delta never above ``target_delta`` (Opacus' search stops within ``epsilon_tolerance`` below the
        target epsilon).
    method : {"auto", "pld", "monte-carlo"}, default "auto"
        ``"auto"``: a scheme whose privacy curve the PLD accountant gives exactly goes to it (deterministic,
        seconds, no key): Poisson DP-SGD, b-min-sep with ``min_sep = 1`` (``C = c_0 I``), cyclic Poisson with a
        public partition (jax-privacy's ``EQUAL_SPLIT``) whose class-0 columns are complete (e.g. ``b | n``)
        -- each scheme's ``exact_pld``; every other scheme goes to Monte Carlo. ``"pld"``: the same, and a
        ``ValueError`` for a scheme without an exact PLD. ``"monte-carlo"``: Monte Carlo EVR in every case
        (Poisson DP-SGD as b-min-sep with ``min_sep = 1``), e.g. to cross-check the two.
    **calibrate_options
        Passed to :func:`mcacct.calibrate` (``ladder_ratio``, ``above``, ``below``, ``chunk_size``,
        ``systematic_reserve``, ``sigmas``, ...), or for Poisson DP-SGD to :func:`mcacct.pld.pld_calibrate`
        (``value_discretization_interval``, ``discretization``). Any other name is a ``ValueError`` suggesting the
        closest accepted name; a Monte Carlo option for Poisson DP-SGD and a PLD option for Monte Carlo are
        refused as such.

    Returns
    -------
    NoiseMultiplier or CostEstimate
        The certificate (``float(result)`` is its ``sigma``), or with ``dry_run`` the cost estimate.

    Examples
    --------
    >>> mcacct.get_noise_multiplier(2.0, 1e-5, sampling_prob=0.01, steps=1000).sigma        # doctest: +SKIP
    >>> mcacct.get_noise_multiplier(2.0, 1e-5, 0.05, 1024, min_sep=8, key=jax.random.key(0))  # doctest: +SKIP
    >>> float(mcacct.get_noise_multiplier(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.01,  # doctest: +SKIP
    ...                                   epochs=10, accountant="prv"))                             # Opacus' call
    """
    t0 = time.perf_counter()
    ensure_compilation_cache()  # a new process reads what an earlier one compiled (MCACCT_CACHE_DIR=off: none)
    check_keywords(calibrate_options, KEYWORDS)
    eps = check_real("target_epsilon", target_epsilon, low=0.0)
    dl = check_real("target_delta", target_delta, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice("method", method, METHODS)
    route = next((n for n, v in (("problem", problem), ("batch_selection", batch_selection), ("min_sep", min_sep))
                  if v is not None), None)
    if route is None and method == "monte-carlo":
        min_sep, route = 1, "min_sep"  # Poisson DP-SGD is b-min-sep with b = 1
    check_accountant(accountant, route)
    check_epsilon_tolerance(epsilon_tolerance)
    sampling_prob, steps = opacus_sampling_and_steps(
        sample_rate=sample_rate, epochs=epochs, sampling_prob=sampling_prob, steps=steps, batch_size=batch_size,
        dataset_size=dataset_size, min_sep=min_sep, truncated=max_batch_size is not None,
        fixed_by=route if route in ("problem", "batch_selection") else None)
    if route is None:
        return _poisson_pld(eps, dl, sampling_prob, steps, batch_size, dataset_size, c_col, max_batch_size,
                            warm_start, key, dry_run, t0, calibrate_options)
    if problem is not None:
        given = [n for n, v in (("sampling_prob", sampling_prob), ("steps", steps), ("min_sep", min_sep),
                                ("c_col", c_col), ("batch_selection", batch_selection), ("batch_size", batch_size),
                                ("dataset_size", dataset_size), ("max_batch_size", max_batch_size),
                                ("warm_start", warm_start)) if v is not None]
        if given:
            raise ValueError(f"problem fixes the scheme and strategy; do not give {', '.join(given)} as well")
    else:
        problem = _problem(steps, sampling_prob, batch_size, dataset_size, min_sep, c_col, max_batch_size,
                           warm_start, batch_selection)
    spec = None if method == "monte-carlo" else problem.scheme.exact_pld(problem.strategy)
    if spec is not None:
        return _exact_pld(eps, dl, problem, spec, num_samples, dry_run, t0, calibrate_options)
    if method == "pld":
        raise ValueError(f"method='pld' needs a scheme with an exact PLD (Poisson DP-SGD, b-min-sep with min_sep = 1, "
                         f"cyclic Poisson with a public partition and complete columns); {problem.scheme!r} has "
                         "none: use method='auto' or 'monte-carlo'")
    if key is None:
        raise ValueError("key is required for a Monte Carlo calibration (the result is a function of it): pass "
                         "key=jax.random.key(seed)")
    pld_only = sorted(set(calibrate_options) & set(PLD_OPTIONS))
    if pld_only:
        raise ValueError(f"{', '.join(pld_only)}: options of the PLD accountant (Poisson DP-SGD, no min_sep); the "
                         f"Monte Carlo calibration takes {', '.join(MONTE_CARLO_OPTIONS)}")
    check_ladder_options(**{k: v for k, v in calibrate_options.items()
                            if k in ("ladder_ratio", "above", "below", "pilot_samples", "sigmas")})
    # the probe's draws only time the program: a key of their own, so the result is calibrate(problem, ..., key)'s
    probe_key = jax.random.fold_in(key, 0x434F5354)
    cost_options = {k: v for k, v in calibrate_options.items() if k in (
        "ladder_ratio", "above", "below", "pilot_samples", "chunk_size", "sigmas", "bracket", "systematic_reserve")}
    cost = estimate_cost(problem, eps, dl, probe_key, num_samples, **cost_options)
    if dry_run:
        return cost
    if progress:
        print(f"[mcacct] get_noise_multiplier: Monte Carlo calibration of {type(problem.scheme).__name__}: "
              f"{cost.summary()}", file=sys.stderr, flush=True)
    res = calibrate(problem, eps, dl, key, num_samples=num_samples, progress=progress, **calibrate_options)
    _, q = evr.overall_delta_terms(res.num_samples, res.base_delta)
    return NoiseMultiplier(float(res.sigma), float(res.epsilon), float(res.overall_delta), dl, "monte-carlo",
                           float(q), int(res.num_samples), bool(res.verified), problem.scheme, problem.strategy, time.perf_counter() - t0, cost, res)


#: Every keyword :func:`get_noise_multiplier` takes: its own (mcacct's and Opacus' names) and the options.
KEYWORDS = tuple(sorted({*inspect.signature(get_noise_multiplier).parameters, *OPACUS_KEYWORDS,
                         *MONTE_CARLO_OPTIONS, *PLD_OPTIONS} - {"calibrate_options"}))


def _exact_pld(eps, dl, problem: Problem, spec, num_samples, dry_run, t0, options: dict) -> NoiseMultiplier:
    """``method="auto"|"pld"`` for a scheme with an exact PLD (``spec`` at sigma = 1): the PLD accountant's
    certified sigma, for that scheme and strategy."""
    from mcacct import pld
    force = "; pass method='monte-carlo' to calibrate it by Monte Carlo instead"
    mc_only = sorted(set(options) - set(PLD_OPTIONS)) + (["num_samples"] if num_samples is not None else [])
    if mc_only:
        raise ValueError(f"{', '.join(mc_only)}: Monte Carlo options; {problem.scheme!r} has an exact PLD and goes to "
                         f"the PLD accountant, which takes {', '.join(PLD_OPTIONS)}{force}")
    if dry_run:
        raise ValueError(f"dry_run applies to Monte Carlo calibrations; {problem.scheme!r} has an exact PLD and goes "
                         f"to the deterministic PLD accountant (seconds){force}")
    sigma = float(pld.pld_calibrate(spec, eps, dl, **options))
    return NoiseMultiplier(sigma, eps, dl, dl, "pld", 0.0, 0, True, problem.scheme, problem.strategy,
                           time.perf_counter() - t0)


def _poisson_pld(eps, dl, sampling_prob, steps, batch_size, dataset_size, c_col, max_batch_size, warm_start, key,
                 dry_run, t0, options: dict) -> NoiseMultiplier:
    from mcacct import pld
    unknown = sorted(set(options) - set(PLD_OPTIONS))  # names no route takes were refused before
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: Monte Carlo options; Poisson DP-SGD uses the PLD accountant, which "
                         "takes value_discretization_interval and discretization")
    for name, v in (("c_col", c_col), ("max_batch_size", max_batch_size), ("warm_start", warm_start)):
        if v is not None:
            raise ValueError(f"{name} needs a b-min-sep scheme (give min_sep); Poisson DP-SGD has none")
    if dry_run:
        raise ValueError("dry_run applies to Monte Carlo calibrations; Poisson DP-SGD uses the deterministic PLD "
                         "accountant (seconds)")
    del key  # deterministic: no randomness
    n = check_count("steps", steps)
    p = _sampling_prob(sampling_prob, batch_size, dataset_size, 1)
    spec = pld.PoissonGaussianSpec(sampling_prob=p, sigma=1.0, steps=n)
    sigma = pld.pld_calibrate(spec, eps, dl, **options)
    return NoiseMultiplier(float(sigma), eps, dl, dl, "pld", 0.0, 0, True,
                           spec.__class__(sampling_prob=p, sigma=float(sigma), steps=n), None,
                           time.perf_counter() - t0)
