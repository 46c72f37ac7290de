"""`make run RUN_ARGS=--chain`: a service chain (topo/chain.yaml, firewall -> nat -> flow_monitor)
instead of one stage of checker NFs.

What changes against the default run, and lives here: each NF runs its stage's NF with the stage's
parameters (`nf_args`) and a global store in the run's etcd (the NAT's port pool is shared by its
instances and survives a fail-over); the server reaches the NAT's public address through the switch
(`neighbours`); the verdict judges packet numbers only (no checker NF counts in the path), and the
NAT's translation must be consistent in both directions (`nat_problems`): every flow reaches the
server from one public address and port of the pool, no two flows share one, and every answer
finds its way back to the client (the verdict's reverse direction).
"""

from __future__ import annotations

import json

from controlplane.config import ControllerConfig
from topo.traffic import SideReport

CHAIN_NF_DEFAULT = "checker"


def nf_args(cfg: ControllerConfig, nf_id: int, global_store: str) -> list[str]:
    """`nf-host run` arguments naming the NF of `nf_id`'s stage, its parameters and the store."""
    st = cfg.stage_config(cfg.stage_of(nf_id))
    args = ["--nf", st.nf or CHAIN_NF_DEFAULT, "--global-store", global_store]
    if st.params:
        args += ["--params", json.dumps(st.params)]
    return args


def public_addresses(cfg: ControllerConfig) -> list[str]:
    """The public addresses of the chain's NATs (stage parameter `public_ip`)."""
    out = []
    for chain in cfg.chains:
        for st in chain.stages:
            if st.params.get("public_ip"):
                out.append(str(st.params["public_ip"]))
    return out


def neighbours(cfg: ControllerConfig, client_mac: str) -> list[str]:
    """`ip neigh` commands for the server: each NAT public address is reached through the switch
    (permanent entries: the switch does not answer ARP)."""
    return [f"ip neigh replace {addr} lladdr {client_mac} nud permanent"
            for addr in public_addresses(cfg)]


def nat_problems(cfg: ControllerConfig, server: SideReport) -> list[str]:
    """The NAT's translation seen from the server: one public source per flow, distinct ports,
    all of the pool. (The answers' way back is judged by the verdict's reverse direction.)"""
    publics = set(public_addresses(cfg))
    if not publics:
        return []
    problems: list[str] = []
    owner: dict[str, int] = {}
    for flow, sources in sorted(server.peers.items()):
        if len(sources) != 1:
            problems.append(f"flow {flow}: reached the server from {len(sources)} sources {sources}")
            continue
        addr = sources[0].rsplit(":", 1)[0]
        if addr not in publics:
            problems.append(f"flow {flow}: source {sources[0]} is not a NAT public address")
        if sources[0] in owner:
            problems.append(f"flows {owner[sources[0]]} and {flow} share the public {sources[0]}")
        owner[sources[0]] = flow
    return problems
