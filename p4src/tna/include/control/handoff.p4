/* Prism TCP connection hand-off (TNA; NOT compiled here). Same tables, actions and counters as
   the v1model program (p4src/v1model/include/control/handoff.p4, docs/prism.md). The checksum
   updates are the same plain arithmetic (p4src/shared/checksum.p4); bf-p4c may want them moved
   to the deparser's Checksum extern (a parser residual, docs/tofino.md). */
#ifndef NFC_TNA_HANDOFF_P4
#define NFC_TNA_HANDOFF_P4

control HandOff(inout headers_t hdr,
                inout local_metadata_t meta,
                in ingress_intrinsic_metadata_t ig_intr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    DirectCounter<bit<64>>(CounterType_t.PACKETS_AND_BYTES) handoff_conn_counter;
    Counter<bit<64>, bit<32>>(HANDOFF_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) handoff_drops;

    action handoff_to_backend(bit<9> port, bit<48> dst_mac, bit<32> dst_addr, bit<16> dst_port) {
        handoff_conn_counter.count();
        meta.bypass = true;
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.tcp.dst_port = dst_port;
    }

    action handoff_to_client(bit<9> port, bit<48> dst_mac, bit<32> src_addr, bit<16> src_port) {
        handoff_conn_counter.count();
        meta.bypass = true;
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.src_addr = src_addr;
        hdr.tcp.src_port = src_port;
    }

    action handoff_lock() {
        handoff_conn_counter.count();
        meta.bypass = true;
        handoff_drops.count(HANDOFF_DROP_LOCKED);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* handoff_conn: exact on the TCP 4-tuple -> one direction's rewrite, or its lock. */
    table handoff_conn {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.tcp.src_port: exact @name("src_port");
            hdr.tcp.dst_port: exact @name("dst_port");
        }
        actions = {
            handoff_to_backend;
            handoff_to_client;
            handoff_lock;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        counters = handoff_conn_counter;
        size = HANDOFF_CONN_TABLE_SIZE;
    }

    action handoff_forward(bit<9> port, bit<48> dst_mac) {
        meta.bypass = true;
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    /* handoff_route: LPM on the IPv4 destination -> a Prism host's port and MAC. */
    table handoff_route {
        key = {
            hdr.ipv4.dst_addr: lpm @name("dst_addr");
        }
        actions = {
            handoff_forward;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = HANDOFF_ROUTE_TABLE_SIZE;
    }

    apply {
        if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && hdr.ipv4.isValid()
                && hdr.tcp.isValid() && !hdr.nfc_shim.isValid()) {
            ipv4_addr_t old_src = hdr.ipv4.src_addr;
            ipv4_addr_t old_dst = hdr.ipv4.dst_addr;
            bit<16> old_sport = hdr.tcp.src_port;
            bit<16> old_dport = hdr.tcp.dst_port;
            if (handoff_conn.apply().hit) {
                hdr.ipv4.hdr_checksum = ipv4_checksum_update(hdr.ipv4.hdr_checksum, old_src, old_dst,
                                                             hdr.ipv4.src_addr, hdr.ipv4.dst_addr);
                hdr.tcp.checksum = tcp_checksum_update(hdr.tcp.checksum, old_src, old_dst,
                                                       old_sport, old_dport,
                                                       hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                                       hdr.tcp.src_port, hdr.tcp.dst_port);
            } else {
                handoff_route.apply();
            }
        }
    }
}

#endif /* NFC_TNA_HANDOFF_P4 */
