/* Per-port packet counters at the pipeline's two ends (TNA; NOT compiled here). Same names as
   the v1model program: port_rx counts every packet that entered ingress, by ingress port;
   port_tx every packet egress let leave, by egress port (a copy egress dropped left out).
   Read by the controller (GET /switch/ports) and `make run`'s loss accounting
   (topo/port_accounting.py), against each port's interface counters. */
#ifndef NFC_TNA_PORT_COUNTERS_P4
#define NFC_TNA_PORT_COUNTERS_P4

control PortRxCounter(in ingress_intrinsic_metadata_t ig_intr_md) {
    Counter<bit<64>, port_num_t>(PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) port_rx;

    apply {
        port_rx.count(ig_intr_md.ingress_port);
    }
}

control PortTxCounter(in egress_intrinsic_metadata_t eg_intr_md,
                      in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Counter<bit<64>, port_num_t>(PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) port_tx;

    apply {
        if (eg_dprsr_md.drop_ctl == 0) {
            port_tx.count(eg_intr_md.egress_port);
        }
    }
}

#endif /* NFC_TNA_PORT_COUNTERS_P4 */
