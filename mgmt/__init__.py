"""mgmt: the management network's shared infrastructure: etcd endpoints, the PKI, TLS for the
control channels.

What the controller (`controlplane`), the NF runtime (`nf_host`) and the launcher (`topo`) each
use to reach one another and etcd over the management network, and to prove who they are there.
It is no part of any one process: none of its modules imports the project outside `mgmt` (a part
that needs more, such as the replication channel's TLS transport, nf_host/tls_streams.py, keeps it
in its own package).

    pki             the local CA: certificates of every component and the heartbeat keys
                    (`python -m mgmt.pki`, `make pki`)
    tls             a component's identity (certificate, key, CA) and the gRPC credentials,
                    channels and `ssl` contexts built from it
    etcd_endpoints  one etcd client over every member of the etcd cluster, over mutual TLS, and
                    the retries that ride over a member's loss
"""
