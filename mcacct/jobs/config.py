r"""The configuration of a shard job (:class:`JobConfig`), its fingerprint and the difference between two
configurations, named key by key in messages. The problem is stored by :mod:`mcacct.jobs.problem_file`; the
files are :mod:`mcacct.jobs.files`, the jobs and their merge :mod:`mcacct.jobs.shards`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from mcacct.core.validate import check_int, check_real, check_sigma_range
from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem
from mcacct.evr.calibrate import candidate_key
from mcacct.statistics.accumulators import DIRECTIONS, HistogramSpec
from mcacct.jobs.problem_file import fingerprint, problem_from_dict, problem_to_dict, scheme_to_dict

__all__ = ["FORMAT", "JobConfig", "config_fingerprint", "config_difference", "describe_difference", "SEED_MAX",
           "CANDIDATE_MAX"]

#: The format of statistics files. Version 4: the scheme is named by its registry name (was its class name).
#: Version 3: every file carries the digest (and, with a key, the MAC) of :mod:`mcacct.jobs.integrity`. Version 2 stored the problem by :mod:`mcacct.jobs.problem_file` (cyclic Poisson's
#: and balls-in-bins' ``min_sep`` became ``cycle_length``). Files of earlier versions are refused, naming both
#: versions.
FORMAT = "mcacct-stats/4"
#: The largest root seed (``jax.random.key`` takes a signed 64-bit integer) and EVR candidate index
#: (``jax.random.fold_in`` takes a uint32).
SEED_MAX = 2**63 - 1
CANDIDATE_MAX = 2**32 - 1



# -- configuration (the problem is stored by mcacct.jobs.problem_file) -----------------------------------
@dataclass(frozen=True)
class JobConfig:
    """Everything that determines the statistics of a sharded run (and hence its fingerprint).

    Parameters
    ----------
    problem:
        Scheme (any registered in :mod:`mcacct.schemes.registry`), strategy, kernel dtype, dot-product method
        and recursion.
    sigma:
        Noise multiplier ``> 0``.
    epsilons:
        Epsilons ``>= 0`` at which the fixed-point sums are kept.
    num_samples:
        Samples per direction of the whole plan (all shards together), ``>= 1``.
    chunk_size:
        Samples per chunk, ``>= 1``.
    seed:
        Root seed (``jax.random.key(seed)``), in ``[0, 2**63 - 1]``.
    candidate:
        EVR ladder candidate in ``[0, 2**32 - 1]``: keys from :func:`mcacct.evr.calibrate.candidate_key`
        (``None``: the root key, as in ``mcacct delta``).
    directions:
        ``('remove', 'add')`` by default.
    spec:
        Histogram binning.
    """

    problem: Problem
    sigma: float
    epsilons: tuple[float, ...]
    num_samples: int
    chunk_size: int = DEFAULT_CHUNK_SIZE
    seed: int = 0
    candidate: int | None = None
    directions: tuple[str, ...] = DIRECTIONS
    spec: HistogramSpec = HistogramSpec()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_sigma_range("sigma", self.sigma))  # before any file is written
        eps = tuple(check_real("epsilon", e, low=0.0) for e in np.atleast_1d(self.epsilons))
        if not eps:
            raise ValueError("epsilon must be given at least once")
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "num_samples", check_int("num_samples", self.num_samples, low=1))
        object.__setattr__(self, "chunk_size", check_int("chunk_size", self.chunk_size, low=1))
        object.__setattr__(self, "seed", check_int("seed", self.seed, low=0, high=SEED_MAX))
        if self.candidate is not None:  # jax.random.fold_in takes a uint32
            object.__setattr__(self, "candidate", check_int("candidate", self.candidate, low=0, high=CANDIDATE_MAX))
        dirs = tuple(self.directions)
        if not dirs or any(d not in DIRECTIONS for d in dirs) or len(set(dirs)) != len(dirs):
            raise ValueError(f"directions must be distinct entries of {DIRECTIONS}; got {dirs}")
        object.__setattr__(self, "directions", dirs)
        if self.num_chunks >= 2**31:
            raise ValueError(f"num_samples / chunk_size must be < 2**31 chunks; got {self.num_chunks}")
        scheme_to_dict(self.problem.scheme)  # refuse a scheme that a job file cannot describe, now

    @property
    def num_chunks(self) -> int:
        """Chunks per direction of the whole plan: ``ceil(num_samples / chunk_size)``."""
        return -(-self.num_samples // self.chunk_size)

    def root_key(self) -> jax.Array:
        """``jax.random.key(seed)``, or the key of EVR candidate ``candidate``.

        Returns
        -------
        jax.Array
            ``jax.random.key(seed)`` when ``candidate`` is ``None``, else
            :func:`mcacct.evr.calibrate.candidate_key` of it and ``candidate``.
        """
        root = jax.random.key(self.seed)
        return root if self.candidate is None else candidate_key(root, self.candidate)

    def to_dict(self) -> dict:
        """Canonical JSON-able description (the fingerprint hashes exactly this): the problem's fields
        (:func:`mcacct.jobs.problem_file.problem_to_dict`: the scheme's class name and every dataclass field, the
        strategy, kernel dtype, dot method, recursion, the kernel identity :data:`KERNEL_VERSION` and the
        random-number generator) and the run parameters.

        Returns
        -------
        dict
            The problem's fields plus ``sigma``, ``epsilons``, ``num_samples``, ``chunk_size``, ``seed``,
            ``candidate``, ``directions`` and ``histogram`` (``width`` and ``bins``).
        """
        return {**problem_to_dict(self.problem),
                "sigma": self.sigma, "epsilons": list(self.epsilons), "num_samples": self.num_samples,
                "chunk_size": self.chunk_size, "seed": self.seed, "candidate": self.candidate,
                "directions": list(self.directions),
                "histogram": {"width": self.spec.width, "bins": self.spec.bins}}

    @classmethod
    def from_dict(cls, d: dict) -> "JobConfig":
        """Inverse of :meth:`to_dict`. Refuses a config of another kernel (:data:`KERNEL_VERSION`) or random-number
        generator.

        Parameters
        ----------
        d : dict
            A config as :meth:`to_dict` writes it.

        Returns
        -------
        JobConfig
            Checked as a new one is (ranges of ``sigma``, ``seed``, ``candidate``, ...).

        Raises
        ------
        ValueError
            ``"config is missing or has a malformed field: ..."``, a config of another kernel or generator
            (:func:`mcacct.jobs.problem_file.problem_from_dict`), or a value out of range, named.
        """
        try:
            problem = problem_from_dict(d, "config")
            spec = HistogramSpec(float(d["histogram"]["width"]), int(d["histogram"]["bins"]))
            return cls(problem, d["sigma"], tuple(d["epsilons"]), d["num_samples"], d["chunk_size"], d["seed"],
                       d["candidate"], tuple(d["directions"]), spec)
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"config is missing or has a malformed field: {err!r}") from err

    def fingerprint(self) -> str:
        """:func:`config_fingerprint` of :meth:`to_dict`.

        Returns
        -------
        str
            32 hexadecimal characters.
        """
        return config_fingerprint(self.to_dict())


def config_fingerprint(cfg: dict) -> str:
    """The fingerprint of a statistics file with config ``cfg`` (:func:`mcacct.jobs.problem_file.fingerprint`
    of :data:`FORMAT` and ``cfg``).

    Parameters
    ----------
    cfg : dict
        A config as :meth:`JobConfig.to_dict` writes it.

    Returns
    -------
    str
        32 hexadecimal characters.
    """
    return fingerprint(FORMAT, cfg)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k in sorted(d):
            out.update(_flatten(d[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def config_difference(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    """Fields (dotted names, e.g. ``sigma`` or ``scheme.min_sep``) where two config dicts differ.

    Parameters
    ----------
    a, b : dict
        Two configs; nested dicts are flattened to dotted names, other values compared whole.

    Returns
    -------
    list of (str, Any, Any)
        ``(name, value in a, value in b)``, sorted by name; ``None`` where a side lacks the field.
    """
    fa, fb = _flatten(a), _flatten(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def describe_difference(diff: list[tuple[str, Any, Any]], where_a: str, where_b: str) -> str:
    """The differences of :func:`config_difference` in words, for messages.

    Parameters
    ----------
    diff : list of (str, Any, Any)
        Output of :func:`config_difference`.
    where_a, where_b : str
        Names of the two sides (e.g. two file names).

    Returns
    -------
    str
        ``"KEY differs (A in where_a, B in where_b)"`` for the first four fields, joined by ``"; "``, then
        ``" and N more field(s)"`` when there are more.
    """
    parts = [f"{k} differs ({va!r} in {where_a}, {vb!r} in {where_b})" for k, va, vb in diff[:4]]
    more = f" and {len(diff) - 4} more field(s)" if len(diff) > 4 else ""
    return "; ".join(parts) + more


# -- plans -------------------------------------------------------------------------------------------------
