/*
 * Forwarding of NF output to the edge, once per input stamp.
 *
 * From an NF port only shim kind OUTPUT carrying IPv4 is accepted. The output dedup then lets
 * each input's output through once: per slot the switch remembers the (epoch, seq) of the last
 * output it forwarded, for the slot's current epoch and for the previous one (during a move the
 * old owner may still release output of its epoch after the new owner's first output). Output
 * whose seq is not after the remembered one, or of an older epoch, is dropped and counted in
 * nf_output_drops: this is what lets a promoted backup send again the output its dead primary
 * may or may not have sent. Accepted output loses its shim (the original EtherType restored)
 * and goes to the edge port found by longest-prefix match on its IPv4 destination. Anything
 * else from an NF port, and output with no route, is dropped and counted per ingress port in
 * nf_port_drops. The rule is described in docs/dataplane.md ("Output dedup").
 */
#ifndef NFC_V1MODEL_FORWARDING_P4
#define NFC_V1MODEL_FORWARDING_P4

control NfOutputForwarding(inout headers_t hdr,
                           inout local_metadata_t meta,
                           inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNT, CounterType.packets_and_bytes) nf_port_drops;

    /*
     * Output dedup state, per slot (written only here, by forwarded output; epoch 0: none yet).
     * out_epoch/out_seq: the current epoch's last forwarded (epoch, seq);
     * out_prev_epoch/out_prev_seq: the previous epoch's.
     */
    register<bit<16>>(SLOT_COUNT) out_epoch;
    register<bit<32>>(SLOT_COUNT) out_seq;
    register<bit<16>>(SLOT_COUNT) out_prev_epoch;
    register<bit<32>>(SLOT_COUNT) out_prev_seq;
    /* Output dropped by the dedup: index OUTPUT_DROP_DUPLICATE, _STALE_EPOCH or _BAD_SLOT. */
    counter(OUTPUT_DROP_REASONS, CounterType.packets_and_bytes) nf_output_drops;

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
                bool first = false;
                bit<32> reason = OUTPUT_DROP_BAD_SLOT;
                if ((bit<32>)hdr.nfc_shim.slot < SLOT_COUNT) {
                    bit<32> index = (bit<32>)hdr.nfc_shim.slot;
                    epoch_t epoch = hdr.nfc_shim.epoch;
                    seq_num_t seq = hdr.nfc_shim.seq;
                    epoch_t cur_epoch;
                    seq_num_t cur_seq;
                    epoch_t prev_epoch;
                    seq_num_t prev_seq;
                    out_epoch.read(cur_epoch, index);
                    out_seq.read(cur_seq, index);
                    out_prev_epoch.read(prev_epoch, index);
                    out_prev_seq.read(prev_seq, index);
                    /* serial-number arithmetic: "after" means less than half the space ahead */
                    epoch_t epoch_ahead = epoch - cur_epoch;
                    seq_num_t cur_ahead = seq - cur_seq;
                    seq_num_t prev_ahead = seq - prev_seq;
                    reason = OUTPUT_DROP_DUPLICATE;
                    if (cur_epoch == 0 || (epoch_ahead != 0 && epoch_ahead < 0x8000)) {
                        /* a newer epoch: the current one becomes the previous one */
                        if (cur_epoch != 0) {
                            out_prev_epoch.write(index, cur_epoch);
                            out_prev_seq.write(index, cur_seq);
                        }
                        out_epoch.write(index, epoch);
                        out_seq.write(index, seq);
                        first = true;
                    } else if (epoch == cur_epoch) {
                        if (cur_ahead != 0 && cur_ahead < 0x80000000) {
                            out_seq.write(index, seq);
                            first = true;
                        }
                    } else if (epoch == prev_epoch) {
                        if (prev_ahead != 0 && prev_ahead < 0x80000000) {
                            out_prev_seq.write(index, seq);
                            first = true;
                        }
                    } else if (prev_epoch == 0) {
                        /* the old owner's first output, after the new owner's */
                        out_prev_epoch.write(index, epoch);
                        out_prev_seq.write(index, seq);
                        first = true;
                    } else {
                        reason = OUTPUT_DROP_STALE_EPOCH;
                    }
                }
                if (first) {
                    hdr.ethernet.ether_type = hdr.nfc_shim.ether_type;
                    hdr.nfc_shim.setInvalid();
                    edge_forward.apply();
                } else {
                    nf_output_drops.count(reason);
                    mark_to_drop(standard_metadata);
                }
            } else {
                nf_port_drops.count((bit<32>)standard_metadata.ingress_port);
                mark_to_drop(standard_metadata);
            }
        }
    }
}

#endif /* NFC_V1MODEL_FORWARDING_P4 */
