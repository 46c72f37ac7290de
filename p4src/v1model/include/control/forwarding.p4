/*
 * Forwarding of NF output to the edge.
 *
 * From an NF port only shim kind OUTPUT carrying IPv4 is accepted: the shim is removed (the
 * original EtherType restored) and the packet goes to the edge port found by longest-prefix
 * match on its IPv4 destination. Anything else from an NF port, and output with no route,
 * is dropped and counted per ingress port in nf_port_drops.
 */
#ifndef NFC_V1MODEL_FORWARDING_P4
#define NFC_V1MODEL_FORWARDING_P4

control NfOutputForwarding(inout headers_t hdr,
                           inout local_metadata_t meta,
                           inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNT, CounterType.packets_and_bytes) nf_port_drops;

    action forward_to_edge(bit<9> port, bit<48> dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    action drop_no_route() {
        nf_port_drops.count((bit<32>)standard_metadata.ingress_port);
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
        if (!meta.bypass && meta.port_role == PORT_ROLE_NF) {
            if (hdr.nfc_shim.isValid() && hdr.nfc_shim.kind == SHIM_KIND_OUTPUT
                    && hdr.ipv4.isValid()) {
                hdr.ethernet.ether_type = hdr.nfc_shim.ether_type;
                hdr.nfc_shim.setInvalid();
                edge_forward.apply();
            } else {
                nf_port_drops.count((bit<32>)standard_metadata.ingress_port);
                mark_to_drop(standard_metadata);
            }
        }
    }
}

#endif /* NFC_V1MODEL_FORWARDING_P4 */
