"""Likelihood against a reference: many weak per-row signals, one paired test for the file.

Why: a file read a few times in training barely moves any one row's likelihood, and a row's
raw likelihood says more about the row (its length, its rare values) than about the model.
Scoring each row against a reference that cannot have read it (another model's likelihood,
zlib's compressed length) takes out most of what the row itself brings; comparing the file's
rows with rows of its twin, each pair scored in the same context, turns the many small
per-row shifts into one test of the file (Maini et al. 2024, Dataset Inference; Carlini et
al. 2021 for zlib as the reference).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tabmem.stats.min_k import min_k_score
from tabmem.stats.permutation import add_one_p_value, paired_sign_test

LN2 = math.log(2.0)
Triple = tuple[float, float, float]
"""A token's (or a field's) log-probability, and the mean and sd of log P over the
distribution at its position (what Min-K%++ standardises by)."""


def weighted_moments(logs: np.ndarray, share: np.ndarray) -> tuple[float, float]:
    """The mean and sd of ``logs`` (a distribution's log-probabilities) under the weights
    ``share``: a category's moments of log p, as Min-K%++ reads them."""
    mean = float(share @ logs)
    return mean, math.sqrt(max(float(share @ (logs - mean) ** 2), 0.0))


def model_bits(logprobs: Sequence[float]) -> float:
    """The bits a model needs to write a text: minus its log-likelihood (nats) in base 2."""
    return -float(sum(logprobs)) / LN2


def zlib_bits(text: str) -> int:
    """The bits zlib (level 9) needs to write a text: a reference that has read nothing."""
    return 8 * len(zlib.compress(text.encode("utf-8"), 9))


def zlib_score(logprobs: Sequence[float], text: str) -> float:
    """How much shorter the model writes ``text`` than zlib does: minus the ratio of their
    bits (higher is more familiar; -1 is as long as zlib's)."""
    return -model_bits(logprobs) / zlib_bits(text)


@dataclass(frozen=True)
class PairedShift:
    """A paired comparison of ``first`` with ``second``: the mean and standard deviation of
    the differences, their ratio (Cohen's d_z, the effect; infinite when every difference is
    the same but 0), the pairs each side won, and the
    one-sided p-values that ``first`` is higher: by flipping the signs of the differences
    (``p_value``; ``n_permutations`` draws) and by the exact sign test."""

    n: int
    mean: float
    sd: float
    effect: float
    wins: int
    losses: int
    ties: int
    p_value: float
    sign_p_value: float
    n_permutations: int

    @property
    def win_rate(self) -> float:
        """The share of untied pairs that ``first`` won (0.5 with none untied)."""
        untied = self.wins + self.losses
        return self.wins / untied if untied else 0.5


def paired_shift_test(
    first: Sequence[float],
    second: Sequence[float],
    permutations: int,
    rng: np.random.Generator,
    tie_tolerance: float = 0.0,
) -> PairedShift:
    """Is ``first[i] - second[i]`` positive on average, more than swapping the two members of
    each pair at random makes it? Under "the two members are exchangeable" each difference is
    as likely with either sign, so flipping signs at random draws the null distribution of
    their sum (add-one Monte Carlo p-value); all-zero differences give p = 1. A difference of at
    most ``tie_tolerance`` is a tie (0): numerical noise, such as the same weights scored in
    other batches on a GPU."""
    a = np.asarray(first, dtype=float)
    b = np.asarray(second, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("paired_shift_test needs two equally long, non-empty lists of scores")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("paired_shift_test needs finite scores")
    if permutations < 1:
        raise ValueError("paired_shift_test needs at least one permutation")
    d = a - b
    d[np.abs(d) <= tie_tolerance] = 0.0
    signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, d.size))
    null = signs @ d
    observed = float(d.sum())
    # Sums equal up to rounding count as reached: all-zero differences must give p = 1.
    tolerance = 1e-9 * max(1.0, float(np.abs(d).sum()))
    p_value = add_one_p_value(observed - tolerance, null)
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    mean = float(d.mean())
    sign = paired_sign_test(d, np.zeros_like(d))
    return PairedShift(
        n=int(d.size),
        mean=mean,
        sd=sd,
        effect=mean / sd if sd > 0 else math.copysign(math.inf, mean) if mean else 0.0,
        wins=sign.wins,
        losses=sign.losses,
        ties=sign.ties,
        p_value=p_value,
        sign_p_value=sign.p_value,
        n_permutations=permutations,
    )


def token_zscores(
    logprobs: Sequence[float], means: Sequence[float], sds: Sequence[float]
) -> list[float]:
    """Each token's log-probability standardised by the model's own distribution at its
    position: (log p(token) - mean) / sd, where mean and sd are the expectation and spread of
    log p(z) for z drawn from that distribution (Zhang et al. 2024, Min-K%++). A token that
    is likelier than a typical draw at its position scores above 0, whatever the position's
    entropy; a position where every token is equally likely (sd 0) scores 0."""
    if not len(logprobs) == len(means) == len(sds):
        raise ValueError("token_zscores needs one mean and one sd for each token")
    return [
        (lp - mu) / sd if sd > 0 else 0.0 for lp, mu, sd in zip(logprobs, means, sds, strict=True)
    ]


def min_k_plus_plus_score(
    logprobs: Sequence[float], means: Sequence[float], sds: Sequence[float], k_percent: float
) -> float:
    """A text's Min-K%++ score: the mean of its ceil(k% of n) lowest standardised token
    scores (``token_zscores``; at least one token). Higher is more familiar: a text seen in
    training has few tokens far below what the model expects at their positions."""
    return min_k_score(token_zscores(logprobs, means, sds), k_percent)


def loglik_ratio(logprobs: Sequence[float], reference: Sequence[float]) -> float:
    """A text's log-likelihood under the model minus under a reference model (nats): what
    the model knows of the text beyond what the reference knows."""
    return float(sum(logprobs)) - float(sum(reference))


def membership_features(
    logprobs: Sequence[float],
    text: str,
    k_percents: Sequence[float],
    moments: tuple[Sequence[float], Sequence[float]] | None = None,
    k_plus_plus: float = 20.0,
    reference: Sequence[float] | None = None,
) -> dict[str, float]:
    """A row's membership features, each computed as its own test computes it: the mean
    log-probability of its tokens (minus the loss), Min-K% at each of ``k_percents``, the
    zlib ratio, Min-K%++ at ``k_plus_plus`` where the moments of the model's distributions
    are given (means, sds), and the ratio to a reference model where its log-probabilities
    are given."""
    if not logprobs:
        raise ValueError("membership_features needs at least one token log-probability")
    out = {"mean_logprob": float(sum(logprobs)) / len(logprobs)}
    for k in k_percents:
        out[f"min_k_{k:g}"] = min_k_score(logprobs, k)
    out["zlib_ratio"] = zlib_score(logprobs, text)
    if moments is not None:
        means, sds = moments
        out["min_k_plus_plus"] = min_k_plus_plus_score(logprobs, means, sds, k_plus_plus)
    if reference is not None:
        out["reference_ratio"] = loglik_ratio(logprobs, reference)
    return out
