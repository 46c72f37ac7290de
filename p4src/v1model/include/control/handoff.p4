/*
 * Prism TCP connection hand-off (docs/prism.md): a frontend accepts a client's connection,
 * reads the request and hands the live connection to a backend (TCP_REPAIR); from then on the
 * switch rewrites the connection's packets so the backend talks to the client directly.
 *
 *   client -> frontend  (key: client, frontend VIP, client port, frontend port)
 *       handoff_to_backend: destination address, port and MAC become the backend's
 *   backend -> client   (key: backend, client, backend port, client port)
 *       handoff_to_client:  source address and port become the frontend's again
 *   handoff_lock: a connection being moved; its packets are dropped (and counted in
 *       handoff_drops[HANDOFF_DROP_LOCKED]): the sender's TCP retransmits them once the
 *       connection is unlocked (a MODIFY back to handoff_to_backend).  Dropping, not holding,
 *       is the design's choice: the switch keeps no packet buffer, and the state captured on
 *       the old owner stays exactly the state the new owner restores.
 * Add, delete and change owner are INSERT, DELETE and MODIFY of handoff_conn entries; each
 * entry has its packet and byte counts (direct counter handoff_conn_counter).
 *
 * Traffic of Prism hosts outside any handed-off connection (the client and the frontend, the
 * frontend and its backends) is forwarded by handoff_route (LPM on the destination).  Both
 * tables see TCP/IPv4 packets from edge ports only, and a miss in both leaves the packet to the
 * rest of the pipeline unchanged, so a switch without Prism entries behaves as before.
 * Checksums: updated incrementally (p4src/shared/checksum.p4) after a rewrite.
 */
#ifndef NFC_V1MODEL_HANDOFF_P4
#define NFC_V1MODEL_HANDOFF_P4

control HandOff(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    direct_counter(CounterType.packets_and_bytes) handoff_conn_counter;
    /* Packets the hand-off control dropped, per reason (HANDOFF_DROP_*). */
    counter(HANDOFF_DROP_REASONS, CounterType.packets_and_bytes) handoff_drops;

    action handoff_to_backend(bit<9> port, bit<48> dst_mac, bit<32> dst_addr, bit<16> dst_port) {
        handoff_conn_counter.count();
        meta.bypass = true;
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.tcp.dst_port = dst_port;
    }

    action handoff_to_client(bit<9> port, bit<48> dst_mac, bit<32> src_addr, bit<16> src_port) {
        handoff_conn_counter.count();
        meta.bypass = true;
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.src_addr = src_addr;
        hdr.tcp.src_port = src_port;
    }

    action handoff_lock() {
        handoff_conn_counter.count();
        meta.bypass = true;
        handoff_drops.count(HANDOFF_DROP_LOCKED);
        mark_to_drop(standard_metadata);
    }

    /*
     * handoff_conn: exact on the TCP 4-tuple -> the rewrite of one direction of a handed-off
     * connection, or its lock.  Written by the controller's hand-off API (controlplane/
     * handoff.py) for the frontend: a hand-off is two batched writes (lock + return path,
     * then unlock to the new owner), a hand-back deletes both entries.  A miss: handoff_route.
     */
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
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    /*
     * handoff_route: LPM on the IPv4 destination -> the port and MAC of a Prism host (client,
     * frontend, backend), for the traffic no handoff_conn entry rewrites. Written by the
     * controller when the Prism service is configured. A miss leaves the packet to the
     * nfcluster pipeline.
     */
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

#endif /* NFC_V1MODEL_HANDOFF_P4 */
