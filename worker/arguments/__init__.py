"""How a kernel is called: its arguments in their compiled types, its TMA tensor maps, half-precision arrays."""
