"""The Prism hand-off controller: one P4Runtime session to the switch and an HTTP API for the
frontend and backends (docs/prism.md).

    POST /handoff   body {"steps": [step, ...]}; every step of the body in ONE P4Runtime Write
                    (with the steps of other requests that arrived while the previous Write
                    was in flight: batching, for frequent hand-offs).
                    Step: {"step": begin|commit|lock|release|handover, "client": [addr,
                    port], "frontend": [addr, port], "backend": [addr, port]}, and for a
                    handover "previous": [addr, port] (the backend it comes from).
                    Answers {"write_ms": ...} (200), 400 for a malformed body, 409 when the
                    switch refused the write (its message in "error").
    GET  /status    {"writes": n, "steps": n, "failures": n}

On becoming primary it pushes the pipeline and writes every host's port_role (edge) and
handoff_route entries. It listens on the management address only (--listen); every request
that changes state needs a JSON body (a browser cannot send one cross-site without a preflight).

    python -m prism.controller --hosts hosts.json --p4info build/nfcluster.p4info.txtpb \
        --device-config build/nfcluster.p4sim --switch 127.0.0.1:9559 --listen 127.0.0.1:8700
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from aiohttp import web
from finsy import P4TableEntry, Switch, SwitchOptions

from prism.handoff_batcher import HandOffBatcher
from prism.handoff_http import handle_handoff
from prism.switch_entries import HandOffEntries, HostPort, load_hosts

LOG = logging.getLogger("prism.controller")


class HandOffController:
    """Owns the switch session; applies batches of hand-off steps (prism.handoff_batcher)."""

    def __init__(self, switch: Switch, hosts: dict[str, HostPort]) -> None:
        self.switch = switch
        self.hosts = hosts
        self.batcher = HandOffBatcher(self._write)

    async def _write(self, updates: list[P4TableEntry]) -> None:
        await self.switch.write(updates)

    async def on_ready(self, sw: Switch) -> None:
        if not sw.is_primary:
            return
        entries = HandOffEntries(sw.p4info, self.hosts)
        await sw.delete_all()
        await sw.write(entries.setup())
        self.batcher.set_entries(entries)
        LOG.info("primary: %d Prism hosts routed", len(self.hosts))


def make_app(ctl: HandOffController) -> web.Application:
    async def handoff(request: web.Request) -> web.Response:
        return await handle_handoff(request, ctl.batcher)

    async def status(_: web.Request) -> web.Response:
        return web.json_response(ctl.batcher.status())

    app = web.Application()
    app.router.add_post("/handoff", handoff)
    app.router.add_get("/status", status)
    return app


async def serve(args: argparse.Namespace) -> None:
    hosts = load_hosts(args.hosts)
    ctl_holder: list[HandOffController] = []

    async def ready(sw: Switch) -> None:
        await ctl_holder[0].on_ready(sw)

    options = SwitchOptions(p4info=args.p4info, p4blob=args.device_config, device_id=args.device_id,
                            initial_election_id=args.election_id, ready_handler=ready)
    switch = Switch("prism", args.switch, options)
    ctl = HandOffController(switch, hosts)
    ctl_holder.append(ctl)
    runner = web.AppRunner(make_app(ctl), access_log=None)
    await runner.setup()
    host, port = args.listen.rsplit(":", 1)
    await web.TCPSite(runner, host, int(port)).start()
    try:
        await switch.run()  # reconnects and re-arbitrates whenever the channel drops
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="prism-controller", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=Path, required=True, help="JSON: name -> {addr, mac, port}")
    parser.add_argument("--p4info", type=Path, default=Path("build/nfcluster.p4info.txtpb"),
                        help="the P4Info make build wrote")
    parser.add_argument("--device-config", type=Path, default=Path("build/nfcluster.p4sim"),
                        help="the device config pushed with it")
    parser.add_argument("--switch", default="127.0.0.1:9559", help="P4Runtime address")
    parser.add_argument("--device-id", type=int, default=1, help="P4Runtime device id")
    parser.add_argument("--election-id", type=int, default=10, help="P4Runtime election id")
    parser.add_argument("--listen", default="127.0.0.1:8700", help="API address (management)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
