"""The example NFs; importing this package registers them all with `nf_host.nf_api`.

Names for `make_nf`: passthrough, firewall, nat, flow_monitor, ids, l4lb, generic, checker.
Each module documents its parameters and its per-flow state; docs/nfs.md summarises them.
"""

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
