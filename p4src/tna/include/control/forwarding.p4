/* Accepted NF output that left the last stage of its chain: to its edge port (TNA; NOT compiled
   here). Same table, actions and counter as the v1model program. */
#ifndef NFC_TNA_FORWARDING_P4
#define NFC_TNA_FORWARDING_P4

control EdgeForwarding(inout headers_t hdr,
                       inout local_metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                       inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<64>, port_num_t>(PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) no_route_drops;

    action forward_to_edge(bit<9> port, bit<48> dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    action drop_no_route() {
        no_route_drops.count(ig_intr_md.ingress_port);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* edge_forward: LPM on the IPv4 destination -> edge port, MAC. Controller: start-up. */
    table edge_forward {
        key = {
            hdr.ipv4.dst_addr: lpm @name("dst_addr");
        }
        actions = {
            forward_to_edge;
            @defaultonly drop_no_route;
        }
        const default_action = drop_no_route();
        size = EDGE_FORWARD_TABLE_SIZE;
    }

    apply {
        if (meta.accepted && !meta.chained) {
            edge_forward.apply();
        }
    }
}

#endif /* NFC_TNA_FORWARDING_P4 */
