/*
 * Per-port packet counters at the pipeline's two ends: port_rx counts every packet that entered
 * the ingress pipeline, by ingress port (the first thing ingress does, whatever happens to the
 * packet after); port_tx every packet the egress pipeline let leave, by egress port (the last
 * thing egress does, dropped copies left out).
 *
 * Who reads them: the controller (Controller.read_port_packets, served at GET /switch/ports),
 * and `make run`'s loss accounting (topo/port_accounting.py), which sets them against each
 * switch port's Linux interface counters over the run: frames the interface received that
 * never reached port_rx were dropped by the target before its pipeline (BMv2's input buffer,
 * its capture socket), packets in port_tx that the interface never sent were dropped by the
 * target after it. docs/dataplane.md, "Registers, counters, digest".
 */
#ifndef NFC_V1MODEL_PORT_COUNTERS_P4
#define NFC_V1MODEL_PORT_COUNTERS_P4

/* v1model's drop port: egress_spec after mark_to_drop (BMv2's default --drop-port) */
const bit<9> V1MODEL_DROP_PORT = 511;

control PortRxCounter(inout standard_metadata_t standard_metadata) {
    counter(PORT_COUNT, CounterType.packets_and_bytes) port_rx;

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
    }
}

control PortTxCounter(inout standard_metadata_t standard_metadata) {
    counter(PORT_COUNT, CounterType.packets_and_bytes) port_tx;

    apply {
        /* mark_to_drop in egress sets egress_spec to the drop port: such a copy never leaves */
        if (standard_metadata.egress_spec != V1MODEL_DROP_PORT) {
            port_tx.count((bit<32>)standard_metadata.egress_port);
        }
    }
}

#endif /* NFC_V1MODEL_PORT_COUNTERS_P4 */
