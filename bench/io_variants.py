"""p4sim's port I/O as the benchmarks compare it: `socket`, `ring`, and `ring-pyloop`, ring I/O
with the native engine's C loop turned off (`P4SIM_NATIVE_RING=0`, read by `p4sim run`): the
Python loop of before, to compare the two loops in one run."""

from __future__ import annotations

IO_VARIANTS = ("socket", "ring", "ring-pyloop")
NATIVE_RING_ENV = "P4SIM_NATIVE_RING"


def parse_ios(text: str) -> list[str]:
    """The comma-separated variants of `text`; ValueError naming the choices if one is unknown
    or none is given."""
    ios = [io for io in text.split(",") if io]
    if not ios or any(io not in IO_VARIANTS for io in ios):
        raise ValueError(f"--io {text}: choose among {','.join(IO_VARIANTS)}")
    return ios


def p4sim_io(variant: str) -> tuple[str, str]:
    """(`p4sim run --io` value, `P4SIM_NATIVE_RING` value) of `variant`."""
    return ("ring", "0") if variant == "ring-pyloop" else (variant, "1")
