"""bench/io_variants.py: the port I/O variants both packet benchmarks take, and what each starts
p4sim with."""

from __future__ import annotations

import pytest

from bench.io_variants import p4sim_io, parse_ios

pytestmark = pytest.mark.unit


def test_ring_pyloop_is_ring_io_with_the_native_loop_off() -> None:
    assert p4sim_io("ring-pyloop") == ("ring", "0")
    assert p4sim_io("ring") == ("ring", "1") and p4sim_io("socket") == ("socket", "1")


def test_variants_are_parsed_and_an_unknown_one_is_named() -> None:
    assert parse_ios("socket,,ring-pyloop") == ["socket", "ring-pyloop"]
    for bad in ("socket,bogus", ""):
        with pytest.raises(ValueError, match="choose among socket,ring,ring-pyloop"):
            parse_ios(bad)


def test_the_veth_benchmark_refuses_an_unknown_variant_before_it_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    from bench.p4sim_server import main

    with pytest.raises(SystemExit) as exc:
        main(["--io", "bogus"])
    assert exc.value.code == 2
    assert "--io bogus: choose among" in capsys.readouterr().err
