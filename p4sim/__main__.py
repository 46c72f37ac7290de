"""The ``p4sim`` command line: ``compile`` (shaped like p4c), ``check`` (the front end alone, also
for TNA programs), ``run`` (the P4Runtime switch), ``status`` (its counters), ``impair`` (a
port's wire impairment) and ``stf`` (p4c's STF tests, `p4sim.stf.run`).

    p4sim compile PROG.p4 --arch v1model --p4runtime-files out.p4info.txtpb [-I DIR] [-D NAME=VAL] [-o OUTDIR]
    p4sim check PROG.p4 --arch tna [-I DIR] [-D NAME=VAL] [--Werror]
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from p4sim.frontend.check import add_check, parse_define
from p4sim.frontend.diagnostics import CompileError


def add_compile(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compile", help="check a P4_16 program and write its P4Info and p4sim device config",
        description="Check a P4_16 v1model program as strictly as p4c and write its P4Runtime "
        "P4Info (--p4runtime-files) and the p4sim device config (-o OUTDIR).")
    p.add_argument("program", help="the P4_16 source file")
    p.add_argument("--arch", default="v1model", choices=["v1model"], help="architecture (only v1model)")
    p.add_argument("--target", default="bmv2", help="accepted for p4c compatibility (ignored)")
    p.add_argument("--std", default="p4-16", choices=["p4-16", "p4_16"], help="language (only P4_16)")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR", help="include directory")
    p.add_argument("-D", dest="define", action="append", default=[], type=parse_define, metavar="NAME[=VAL]",
                   help="preprocessor define")
    p.add_argument("--p4runtime-files", default="", metavar="FILES",
                   help="comma-separated P4Info outputs; format by extension: .txt/.txtpb text, .json, .bin")
    p.add_argument("-o", "--output", dest="outdir", metavar="OUTDIR",
                   help="directory for the device config (<program>.p4sim), <program>.p4info.txtpb and, "
                   "with the native engine, the generated C (<program>.c)")
    p.add_argument("--engine", choices=["python", "native"], default=None,
                   help="native (default: also generate the program's C and build it into the "
                   "native engine's cache; a program it cannot run says why) or python")
    p.set_defaults(func=compile_cmd)


def compile_cmd(args: argparse.Namespace) -> int:
    from p4sim.runtime.engine_loader import load_switch

    try:
        sw = load_switch(args.program, args.include, dict(args.define), engine=args.engine)
    except CompileError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    for warning in sw.warnings:
        print(warning, file=sys.stderr)
    for f in [x for x in args.p4runtime_files.split(",") if x]:
        _write_p4info(sw, Path(f))
    if args.outdir:
        out = Path(args.outdir)
        out.mkdir(parents=True, exist_ok=True)
        stem = Path(args.program).stem
        (out / f"{stem}.p4sim").write_bytes(sw.device_config())
        c_source = getattr(sw, "c_source", None)
        if c_source is not None:
            (out / f"{stem}.c").write_text(c_source)
        _write_p4info(sw, out / f"{stem}.p4info.txtpb")
    return 0


def _write_p4info(sw: object, path: Path) -> None:
    # google.protobuf ships no type stubs here; import its formatters dynamically (typed as Any)
    json_format = importlib.import_module("google.protobuf.json_format")
    text_format = importlib.import_module("google.protobuf.text_format")
    info = sw.p4info  # type: ignore[attr-defined]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".json":
        path.write_text(json_format.MessageToJson(info))
    elif path.suffix == ".bin":
        path.write_bytes(info.SerializeToString())
    else:
        path.write_text(text_format.MessageToString(info))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="p4sim", description="p4sim: a P4_16 v1model target in Python")
    sub = parser.add_subparsers(dest="command", required=True)
    add_compile(sub)
    add_check(sub)
    from p4sim.server.cli import register_impair, register_run, register_status

    register_run(sub)
    register_status(sub)
    register_impair(sub)
    from p4sim.stf.run import register_stf

    register_stf(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
