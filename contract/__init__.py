"""What the processes agree on; imports nothing of the project.

The controller (`controlplane`), the NF runtime (`nf_host`), the switch's tests (`ptf_tests`),
the topology and its traffic (`topo`), the simulation (`sim`) and the benchmarks (`bench`) import
their shared definitions from here instead of from each other's internals: the Python twin of
`p4src/shared/`. Nothing in this package imports a module of the project outside it.

    shim            the shim header between Ethernet and the packet (byte layout, kinds, flags)
    seq             serial-number arithmetic of sequence numbers (32 bits) and epochs (16 bits)
    slot_hash       the switch's symmetric slot hash of a 5-tuple
    checker_record  the numbered-traffic record the checker NF stamps
    heartbeat       the UDP heartbeat datagrams (controller <-> NF)
    timing          the protocol's time limits
    roles           NF and slot roles (the NF control API's enums, and the controller's words)
    nf_params       an NF's parameters (a JSON object): the one parsing rule
    replication     the replication channel's messages and their one codec
    commands        the NF control commands (controller -> NF parent -> worker), typed
    results         what those commands answer, one frozen dataclass per kind
    dispatch        the one dispatch table (item type -> handler) of the worker's commands and of
                    the replication receiver's messages, each raising its own error
    proto           the NF control API (gRPC), generated from proto/nf_control.proto
"""
