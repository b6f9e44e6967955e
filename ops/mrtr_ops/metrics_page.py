"""Reading a Prometheus text page (a worker's `/metrics`, the proxy's `/lb/metrics`) with prometheus_client's parser."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class MetricsPage:
    """One scrape: every sample, by name and sorted labels."""

    samples: dict[tuple[str, Labels], float]

    @classmethod
    def parse(cls, text: str) -> MetricsPage:
        found: dict[tuple[str, Labels], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
        return cls(found)

    def matching(self, name: str, **labels: str) -> Iterator[tuple[Labels, float]]:
        """The samples called `name` whose labels include `labels`."""
        for (sample_name, sample_labels), value in self.samples.items():
            if sample_name == name and all((key, labels[key]) in sample_labels for key in labels):
                yield sample_labels, value

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples called `name` whose labels include `labels` (0 if there are none)."""
        return sum(value for _, value in self.matching(name, **labels))

    def by_label(self, name: str, label: str, **labels: str) -> dict[str, float]:
        """The samples called `name`, summed per value of `label`."""
        found: dict[str, float] = {}
        for sample_labels, value in self.matching(name, **labels):
            key = dict(sample_labels).get(label)
            if key is not None:
                found[key] = found.get(key, 0.0) + value
        return found
