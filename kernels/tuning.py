"""The search space of a variant's tunables: every combination of their allowed values."""

import itertools

from kernels.registry import KernelSpec


def configurations(spec: KernelSpec) -> list[dict[str, int]]:
    """All tunable combinations, defaults first (a variant with no tunables has one: {})."""
    names = [t.name for t in spec.tunables]
    combos = [dict(zip(names, values)) for values in itertools.product(*(t.values for t in spec.tunables))]
    default = spec.defaults()
    return [default] + [c for c in combos if c != default]
