/*
 * Accepted NF output that left the last stage of its chain goes to its edge port, found by
 * longest-prefix match on its IPv4 destination. Output with no route is dropped and counted
 * per ingress port in no_route_drops.
 */
#ifndef NFC_V1MODEL_FORWARDING_P4
#define NFC_V1MODEL_FORWARDING_P4

control EdgeForwarding(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNT, CounterType.packets_and_bytes) no_route_drops;

    action forward_to_edge(bit<9> port, bit<48> dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    action drop_no_route() {
        no_route_drops.count((bit<32>)standard_metadata.ingress_port);
        mark_to_drop(standard_metadata);
    }

    /*
     * edge_forward: LPM on the IPv4 destination -> the edge port and next-hop MAC.
     * Written by the controller at start-up from its configuration (the hosts or subnets
     * behind each edge port).
     */
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

#endif /* NFC_V1MODEL_FORWARDING_P4 */
