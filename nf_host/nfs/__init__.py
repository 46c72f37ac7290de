"""The example NFs, and `make_nf`, which instantiates a registered NF by name.

Importing this package registers them all with `nf_host.nf_api` (`NF_TYPES`). Names for
`make_nf`: passthrough, firewall, nat, flow_monitor, ids, l4lb, generic, checker. Each module
documents its parameters and its per-flow state; docs/nfs.md summarises them. `make_nf` lives
here, not in `nf_api`, so that the NF API never imports the NFs written against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nf_host.nf_api import NF_TYPES, NetworkFunction
from nf_host.nfs import (  # noqa: F401  (imported for their @register_nf side effect)
    checker,
    firewall,
    flow_monitor,
    generic,
    ids,
    l4lb,
    nat,
    passthrough,
)


def make_nf(name: str, params: Mapping[str, Any] | None = None) -> NetworkFunction:
    """Instantiate a registered NF by name, with a clear error naming the unknown one."""
    try:
        cls = NF_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown NF type {name!r}; known: {', '.join(sorted(NF_TYPES))}") from None
    return cls(params)
