/*
 * Forwarding of NF output to the edge, once per input stamp.
 *
 * From an NF port only shim kind OUTPUT carrying IPv4 is accepted. The output dedup then lets
 * each input's output through once: per slot the switch remembers the (epoch, seq) of the last
 * output it forwarded, for the slot's current epoch and for the previous one (during a move the
 * old owner may still release output of its epoch after the new owner's first output); the two
 * are told apart by the epoch's parity (epochs run 1..65534, so consecutive ones alternate). Output
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
     * Output dedup state (written only here, by forwarded output): per slot and epoch parity,
     * the epoch and seq of the last output forwarded (index slot * 2 + epoch % 2; epoch 0: none
     * yet). The current epoch and the previous one have different parities, so both are kept.
     */
    register<bit<16>>(OUTPUT_DEDUP_SIZE) out_epoch;
    register<bit<32>>(OUTPUT_DEDUP_SIZE) out_seq;
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
                    bit<32> index = ((bit<32>)hdr.nfc_shim.slot << 1)
                                    | (bit<32>)(hdr.nfc_shim.epoch & 1);
                    epoch_t last_epoch;
                    seq_num_t last_seq;
                    out_epoch.read(last_epoch, index);
                    out_seq.read(last_seq, index);
                    /* serial-number arithmetic: "after" means less than half the space ahead */
                    epoch_t epoch_ahead = hdr.nfc_shim.epoch - last_epoch;
                    seq_num_t seq_ahead = hdr.nfc_shim.seq - last_seq;
                    if (last_epoch == 0 || (epoch_ahead != 0 && epoch_ahead < 0x8000)) {
                        /* the first output of a newer epoch of this parity */
                        out_epoch.write(index, hdr.nfc_shim.epoch);
                        out_seq.write(index, hdr.nfc_shim.seq);
                        first = true;
                    } else if (epoch_ahead == 0) {
                        if (seq_ahead != 0 && seq_ahead < 0x80000000) {
                            out_seq.write(index, hdr.nfc_shim.seq);
                            first = true;
                        } else {
                            reason = OUTPUT_DROP_DUPLICATE;
                        }
                    } else {
                        reason = OUTPUT_DROP_STALE_EPOCH;  /* two or more epochs old */
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
