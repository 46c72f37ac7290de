"""The TARGET=bmv2 legs, checked without BMv2: the files `make build` writes are the ones
`make run TARGET=bmv2`, the controller and the PTF runner use; a missing device config stops the
controller at once with its path; the PTF runner copes with a missing switch log."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from controlplane.__main__ import main as controller_main
from controlplane.config import SwitchConfig, load_config
from ptf_tests import run as ptf_run
from topo.launch.bringup import runtime_config
from topo.launch.options import options_from
from topo.model import DEFAULT_RATES, RunOptions

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parents[1]


def build_outputs() -> dict[str, Path]:
    """What mk/dataplane.mk makes p4c-bm2-ss write (P4Info, JSON), relative to the repo."""
    mk = (REPO / "mk" / "dataplane.mk").read_text().replace("$(P4_BUILD_DIR)", "build")
    p4info = re.search(r"--p4runtime-files (\S+bmv2\S+)", mk)
    json = re.search(r"-o (\S+bmv2/\S+\.json) \$\(P4_PROGRAM\)", mk)
    assert p4info and json, "mk/dataplane.mk no longer says where BMv2's outputs go"
    return {"p4info": REPO / p4info.group(1), "json": REPO / json.group(1)}


def test_bmv2_p4info_is_written_in_the_text_format_p4c_does_not_deprecate() -> None:
    assert build_outputs()["p4info"].name.endswith(".txtpb")


def test_make_run_bmv2_resolves_the_device_config_make_build_writes(tmp_path: Path) -> None:
    path = runtime_config(REPO / "topo" / "nfcluster.yaml", "bmv2", "127.0.0.1:9559",
                          ["127.0.0.1:2379"], "127.0.0.1:8080", tmp_path)
    cfg = load_config(path).switch
    outputs = build_outputs()
    assert cfg.p4info == outputs["p4info"]
    assert cfg.device_config_path() == outputs["json"]  # not build/bmv2/bmv2/nfcluster.json


@pytest.mark.parametrize(("target", "p4info", "expected"), [
    ("bmv2", "build/bmv2/nfcluster.p4info.txtpb", "build/bmv2/nfcluster.json"),
    ("bmv2", "build/nfcluster.p4info.txtpb", "build/bmv2/nfcluster.json"),
    ("p4sim", "build/nfcluster.p4info.txtpb", "build/nfcluster.p4sim"),
    ("tofino", "build/nfcluster.p4info.txtpb", "build/tofino/nfcluster.bin"),
])
def test_device_config_defaults_by_target(target: str, p4info: str, expected: str) -> None:
    cfg = SwitchConfig(target=target, p4info=Path(p4info))  # type: ignore[arg-type]
    assert cfg.device_config_path() == Path(expected)


def test_ptf_runner_uses_what_make_build_writes_for_bmv2() -> None:
    outputs = build_outputs()
    build = REPO / "build"
    assert build / ptf_run.BMV2_P4INFO == outputs["p4info"]
    assert build / ptf_run.BMV2_CONFIG == outputs["json"]


def test_a_missing_device_config_stops_the_controller_at_once_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((REPO / "topo" / "nfcluster.yaml").read_text())
    p4info = tmp_path / "nfcluster.p4info.txtpb"
    p4info.write_text((REPO / "build" / "nfcluster.p4info.txtpb").read_text())
    data["switch"].update(target="bmv2", p4info=str(p4info))
    config = tmp_path / "controller.yaml"
    config.write_text(yaml.safe_dump(data))
    assert controller_main(["run", "--config", str(config), "--no-etcd"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "bmv2" / "nfcluster.json") in err and "make build" in err


def test_ptf_runner_says_when_there_is_no_switch_log(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ptf_run.print_switch_log(tmp_path / "switch.log")
    assert "no switch log to show" in capsys.readouterr().err
    (tmp_path / "switch.log").write_text("")
    ptf_run.print_switch_log(tmp_path / "switch.log")
    assert "is empty" in capsys.readouterr().err
    (tmp_path / "switch.log").write_text("line 1\nline 2\n")
    ptf_run.print_switch_log(tmp_path / "switch.log")
    assert "line 2" in capsys.readouterr().err


def test_a_slot_count_that_is_not_the_programs_stops_the_controller_naming_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((REPO / "topo" / "nfcluster.yaml").read_text())
    data["switch"].update(slot_bits=10, p4info=str(REPO / "build" / "nfcluster.p4info.txtpb"))
    config = tmp_path / "controller.yaml"
    config.write_text(yaml.safe_dump(data))
    assert controller_main(["run", "--config", str(config), "--no-etcd"]) == 2
    err = capsys.readouterr().err
    assert "slot_bits is 10 (1024 slots per stage" in err and "holds 16384 in slot_owner" in err


def run_options(*argv: str) -> RunOptions:
    from topo.__main__ import build_parser

    return options_from(build_parser().parse_args(["run", *argv]))


def test_make_run_picks_a_rate_below_bmv2s_capacity_unless_told() -> None:
    """BMv2 lost 1.4% at p4sim's 400 pkt/s (docs/bmv2.md): TARGET=bmv2 sends at 200 by default;
    an explicit --rate wins on both targets."""
    assert run_options("--target", "bmv2").rate == DEFAULT_RATES["bmv2"] == 200.0
    assert run_options("--target", "p4sim").rate == run_options().rate == 400.0
    assert run_options("--target", "bmv2", "--rate", "350").rate == 350.0
    assert run_options("--target", "bmv2").bmv2_queue_depth == 1024
    assert run_options("--target", "bmv2", "--bmv2-queue-depth", "0").bmv2_queue_depth == 0


def test_chaos_on_bmv2_picks_its_lower_rate_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import topo.__main__ as topo_main

    seen: list[float] = []

    def cmd_run(args: argparse.Namespace) -> int:  # nothing is started
        seen.append(args.rate)
        return 0

    monkeypatch.setattr(topo_main, "cmd_run", cmd_run)
    for target in ("bmv2", "p4sim"):
        args = topo_main.build_parser().parse_args(["chaos", "--target", target,
                                                    "--fault-kinds", "primary"])
        assert topo_main.cmd_chaos(args) == 0
    assert seen == [topo_main.CHAOS_RATES["bmv2"], topo_main.CHAOS_RATES["p4sim"]]


def test_bmv2s_egress_queue_depth_goes_through_its_runtime_cli(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import subprocess

    from topo.launch import switches
    assert switches.bmv2_runtime_commands(1024) == ["set_queue_depth 1024"]
    assert switches.bmv2_runtime_commands(0) == switches.bmv2_runtime_commands(None) == []
    calls: list[tuple[list[str], str]] = []

    def fake_run(cmd: list[str], input: str, **_: object) -> subprocess.CompletedProcess[str]:
        calls.append((cmd, input))
        return subprocess.CompletedProcess(cmd, 0, "RuntimeCmd: ", "")

    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "not on PATH" in (switches.run_bmv2_cli(9090, ["set_queue_depth 8"], fake_run) or "")
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/local/bin/{name}")
    assert switches.run_bmv2_cli(9090, ["set_queue_depth 8"], fake_run) is None
    assert calls == [(["/usr/local/bin/simple_switch_CLI", "--thrift-port", "9090"],
                      "set_queue_depth 8\n")]
    assert switches.run_bmv2_cli(9090, [], fake_run) is None and len(calls) == 1

    def refused(cmd: list[str], input: str, **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "Could not connect to thrift client")

    assert "failed (1)" in (switches.run_bmv2_cli(9090, ["set_queue_depth 8"], refused) or "")
