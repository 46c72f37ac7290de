"""The Prism hand-off controller: one P4Runtime session to the switch and an HTTP API for the
frontend and backends (docs/prism.md).

    POST /handoff   body {"steps": [step, ...]}; every step of the body in ONE P4Runtime Write
                    (with the steps of other requests that arrived while the previous Write
                    was in flight: batching, for frequent hand-offs).
                    Step: {"step": begin|commit|lock|release, "client": [addr, port],
                    "frontend": [addr, port], "backend": [addr, port]}.
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
import json
import logging
import time
from pathlib import Path

from aiohttp import web
from finsy import P4TableEntry, Switch, SwitchOptions
from finsy.p4client import P4ClientError

from prism.switch_entries import HandOffEntries, HandOffStep, HostPort

LOG = logging.getLogger("prism.controller")


def load_hosts(path: Path) -> dict[str, HostPort]:
    """{addr: HostPort} from a JSON file {"name": {"addr", "mac", "port"}, ...}."""
    data = json.loads(path.read_text())
    return {h["addr"]: HostPort(h["addr"], h["mac"], int(h["port"])) for h in data.values()}


class HandOffController:
    """Owns the switch session; applies batches of hand-off steps."""

    def __init__(self, switch: Switch, hosts: dict[str, HostPort]) -> None:
        self.switch = switch
        self.hosts = hosts
        self.entries: HandOffEntries | None = None
        self.ready = asyncio.Event()
        self.writes = self.steps = self.failures = 0
        self._pending: list[tuple[list[P4TableEntry], int, asyncio.Future[float]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def on_ready(self, sw: Switch) -> None:
        if not sw.is_primary:
            return
        self.entries = HandOffEntries(sw.p4info, self.hosts)
        await sw.delete_all()
        await sw.write(self.entries.setup())
        self.ready.set()
        LOG.info("primary: %d Prism hosts routed", len(self.hosts))

    async def apply(self, steps: list[HandOffStep]) -> float:
        """Write the steps' updates; returns the duration of the Write that carried them, in ms.

        Batching: steps that arrive while a Write is in flight wait and go together in the next
        one (one Write for every request that came meanwhile), so a busy frontend's hand-offs
        cost one switch round trip per batch, not per step. Steps of one connection are never
        in one batch (each waits for its own answer before the next), and no step depends on an
        order among the updates of a Write. A Write the switch refuses fails every request it
        carried (409); the failure is counted."""
        await self.ready.wait()
        assert self.entries is not None
        updates = [u for s in steps for u in self.entries.updates(s)]  # ValueError: bad host
        done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._pending.append((updates, len(steps), done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._drain())
        return await done

    async def _drain(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            start = time.perf_counter()
            try:
                await self.switch.write([u for updates, _, _ in batch for u in updates])
            except P4ClientError as exc:
                self.failures += 1
                for _, _, done in batch:
                    done.set_exception(exc)
                continue
            ms = (time.perf_counter() - start) * 1000.0
            self.writes += 1
            for _, n, done in batch:
                self.steps += n
                done.set_result(ms)


def make_app(ctl: HandOffController) -> web.Application:
    async def handoff(request: web.Request) -> web.Response:
        if request.content_type != "application/json":
            return web.json_response({"error": "a JSON body is required"}, status=415)
        try:
            body = await request.json()
            steps = [HandOffStep.parse(s) for s in body["steps"]]
        except (ValueError, KeyError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        try:
            write_ms = await ctl.apply(steps)
        except ValueError as exc:  # an address that is no Prism host
            return web.json_response({"error": str(exc)}, status=400)
        except P4ClientError as exc:
            return web.json_response({"error": str(exc)}, status=409)
        return web.json_response({"write_ms": write_ms})

    async def status(_: web.Request) -> web.Response:
        return web.json_response({"writes": ctl.writes, "steps": ctl.steps,
                                  "failures": ctl.failures, "ready": ctl.ready.is_set()})

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
