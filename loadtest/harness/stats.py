"""Latency statistics: percentiles of raw samples (the load phases) and of Prometheus histograms
(visibility, which the services record and the benchmark only reads)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """``q``-quantile (0..1) of already sorted samples, interpolating between neighbours."""
    if not sorted_values:
        return None
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def median_present(values: Sequence[float | None]) -> float | None:
    """The median of the values there are ("no value" left out), None when there is none: a
    figure over rounds, some of which measured nothing."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def mean_present(values: Sequence[float | None], digits: int = 1) -> float | None:
    """The mean of the values there are, rounded to ``digits``; None when there is none."""
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), digits) if present else None


@dataclass(frozen=True)
class Latency:
    """The one summary of latency samples every experiment reports (milliseconds; None where
    nothing was measured). Read back from JSON with ``Latency(**row)``: a row written with fewer
    fields (an older run) still reads."""

    count: int = 0
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None

    @staticmethod
    def of(values_ms: Sequence[float]) -> Latency:
        if not values_ms:
            return Latency()
        ordered = sorted(values_ms)
        return Latency(
            count=len(ordered), mean_ms=statistics.fmean(ordered), p50_ms=percentile(ordered, 0.5),
            p90_ms=percentile(ordered, 0.9), p99_ms=percentile(ordered, 0.99), max_ms=ordered[-1],
        )  # fmt: skip


def to_ms(seconds: float | None) -> float | None:
    """Seconds as milliseconds, keeping "no value" as None (reports show it as "-")."""
    return None if seconds is None else 1000 * seconds


@dataclass(frozen=True)
class Histogram:
    """A Prometheus histogram: cumulative counts per upper bound (ascending, last one +Inf)."""

    buckets: tuple[tuple[float, float], ...]
    sum: float = 0.0
    count: float = 0.0

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def cumulative_ms(self) -> list[tuple[float, float]]:
        """(upper bound in ms, observations at or below it) for the finite bounds: JSON's shape."""
        return [(1000 * bound, cumulative) for bound, cumulative in self.buckets if not math.isinf(bound)]

    @classmethod
    def of_cumulative_ms(cls, cumulative: Sequence[Sequence[float]], count: float) -> Histogram:
        """The histogram ``cumulative_ms`` describes, ``count`` observations in all (no sum)."""
        buckets = (*((ms / 1000, c) for ms, c in cumulative), (math.inf, count))
        return cls(buckets, 0.0, count)

    def cdf_ms(self) -> list[tuple[float, float]]:
        """(upper bound in ms, fraction at or below it) for the finite bounds: a CDF to draw."""
        if self.count <= 0:
            return []
        return [(ms, cumulative / self.count) for ms, cumulative in self.cumulative_ms()]

    def minus(self, earlier: Histogram | None) -> Histogram:
        """What was observed since ``earlier`` (counters only grow, so differences are exact)."""
        if earlier is None:
            return self
        before = dict(earlier.buckets)
        buckets = tuple((bound, count - before.get(bound, 0.0)) for bound, count in self.buckets)
        return Histogram(buckets, self.sum - earlier.sum, self.count - earlier.count)

    def quantile(self, q: float) -> float | None:
        """Estimated like PromQL's histogram_quantile: linear interpolation inside the bucket
        holding rank ``q * count``; a rank in the +Inf bucket gives the highest finite bound."""
        if self.count <= 0:
            return None
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in self.buckets:
            if cumulative >= rank:
                if math.isinf(bound):
                    return lower_bound
                in_bucket = cumulative - lower_count
                if in_bucket <= 0:
                    return lower_bound
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / in_bucket
            lower_bound, lower_count = bound, cumulative
        return lower_bound
