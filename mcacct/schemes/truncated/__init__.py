r"""Truncated (fixed-batch-size) b-min-sep subsampling: accounting for Dong & Ganesh 2026 [arXiv:2602.09338], App. D.

Sampler. Batches are formed by b-min-sep subsampling (Alg. 1 or Alg. 2) of ``M`` examples and then
truncated to a uniformly random subset of ``B_max`` examples when larger (and padded with zero-gradient
examples when smaller). An example dropped by truncation still blocks itself for the next ``b - 1``
iterations: the participation process is that of untruncated b-min-sep.

Adversary. As in App. D the adversary additionally sees, for every iteration ``i``, the number ``r_i`` of
*other* examples drawn before truncation (released as post-processing-free side information: its law is
the same on both datasets, so the guarantee only gets weaker). Given :math:`r = (r_i)`, the sensitive
example is drawn as usual and, when drawn at ``i``, truncation happens iff :math:`r_i + 1 > B_{max}`, in
which case it survives with probability :math:`w_i = B_{max}/(r_i + 1)`.

Dominating pair (Lemma D.1, Cor. D.2, zero-out adjacency). Relative to the batch without the example, the
worst case gives (``C`` banded, ``k <= b``)

.. math::
    P_r = \sum_x \Pr[x \mid r]\, N(C x, \sigma^2 I), \qquad Q_r = \sum_{x'} \Pr[x' \mid r]\, N(C x', \sigma^2 I),

with per-iteration amplitudes ``x_i = 2`` (drawn, truncated, survives), ``1`` (drawn, no truncation),
``0`` otherwise, and ``x'_i = -1`` (drawn, truncated, survives), ``0`` otherwise: a surviving example
replaces one other example whose gradient may point the opposite way (``g - v``, norm 2, on one side and
``-v`` on the other). **Both** sides are mixtures, so ``Q`` is not a single Gaussian.

Losses. With :math:`R = N(0, \sigma^2 I)`, both :math:`P_r/R` and :math:`Q_r/R` follow the recursion of
Theorem 5.1 with participation probability ``p`` and an iteration-dependent participation term.
With :math:`s_i = \langle c^{(i)}, y\rangle/\sigma^2`, :math:`v_i = \|c^{(i)}\|^2/\sigma^2`:

.. math::
    \ln\frac{P_r}{R}: \quad \ell^P_i = \begin{cases} s_i - v_i/2 & r_i < B_{max} \\
        \ln\big(w_i e^{2 s_i - 2 v_i} + 1 - w_i\big) & r_i \ge B_{max} \end{cases}
    \qquad
    \ln\frac{Q_r}{R}: \quad \ell^Q_i = \begin{cases} 0 & r_i < B_{max} \\
        \ln\big(w_i e^{-s_i - v_i/2} + 1 - w_i\big) & r_i \ge B_{max} \end{cases}

in :math:`f_i = (1-p) f_{i+1} + p\, e^{\ell_i} f_{i+b}`, :math:`f_i = 1` for :math:`i > n`. The warm start
combines each side separately, :math:`(f_1 + p \sum_{i=2}^b f_i)/(1 + (b-1)p)`, *before* the ratio, and

.. math::  L(y; r) = \ln\frac{P_r}{R}(y) - \ln\frac{Q_r}{R}(y).

The ``remove`` direction samples ``(r, y ~ P_r)`` and returns ``L``; ``add`` samples ``(r, y ~ Q_r)`` and
returns ``-L``. Since ``r`` has the same law under both datasets, the hockey-stick divergence of the
augmented pair is :math:`E_r[H(P_r \| Q_r)]`, which is what these samples estimate.

Law of ``r``. The ``M - 1`` other examples run independent b-min-sep chains; an example drawn at ``j`` is
blocked for ``j+1..j+b-1``, so

.. math::  r_i \mid r_{<i} \sim \mathrm{Binom}\Big(M - 1 - \sum_{j=i-b+1}^{i-1} r_j,\ p\Big),

with ``r_j = 0`` for ``j < 1`` (cold start) or, for the warm start, the virtual history
``(r_0, r_{-1}, ..., r_{2-b})`` multinomial with ``M - 1`` trials and cell probabilities
``p / (1 + (b-1) p)``. The counts come from integer tables (:mod:`mcacct.schemes.truncated.counts`), only for the samples
that can have a truncated round (:mod:`mcacct.schemes.truncated.screen`), within the total variation
:meth:`TruncatedBMinSep.draw_law_tv` of the exact law, added to every reported delta.

Engine. A round is *truncated* when ``r_i >= B_max``. Without one, ``ell^Q = 0`` gives ``f = 1``, so the loss is
:class:`~mcacct.schemes.bminsep.BMinSep`'s on the same ``y``: computed for every sample, and the two mixture
recursions only for the samples with a truncated round (a buffer), on shared draws (``ladder_losses``). With
``B_max >= M`` truncation never happens, ``Q_r = R`` and ``r`` is not drawn.

**The room.** The scheme and the kernels only it uses:

* :mod:`~mcacct.schemes.truncated.scheme` — :class:`TruncatedBMinSep`, the scheme;
* :mod:`~mcacct.schemes.truncated.block_counts` — a block's counts as its losses read them, drawn in the block or
  ahead for many blocks;
* :mod:`~mcacct.schemes.truncated.sub_blocks` — a block's participation and noise, a sub-block at a time (the
  noise redrawn by columns where it is needed again);
* :mod:`~mcacct.schemes.truncated.screen` — the screened count chain (which draws can be truncated at all), and
  :mod:`~mcacct.schemes.truncated.hypergeometric`, its draw at the first round that can be truncated;
* :mod:`~mcacct.schemes.truncated.counts` — exact counts of the other examples (binomial and hypergeometric
  tables);
* :mod:`~mcacct.schemes.truncated.virtual` and :mod:`~mcacct.schemes.truncated.digits` — the warm start's
  virtual history and its exact digit tables.
"""

from mcacct.schemes.truncated.scheme import TruncatedBMinSep

__all__ = ["TruncatedBMinSep"]
