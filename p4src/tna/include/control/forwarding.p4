/*
 * NF output to the edge, once per input stamp (TNA; NOT compiled here). The output dedup keeps,
 * per slot and epoch parity, the (epoch, seq) of the last output forwarded, in one pair register
 * read and written by one RegisterAction (the same rule as the v1model program's four-step
 * version; docs/dataplane.md, "Output dedup").
 */
#ifndef NFC_TNA_FORWARDING_P4
#define NFC_TNA_FORWARDING_P4

control NfOutputForwarding(inout headers_t hdr,
                           inout local_metadata_t meta,
                           in ingress_intrinsic_metadata_t ig_intr_md,
                           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    Counter<bit<64>, port_num_t>(PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) nf_port_drops;
    Counter<bit<64>, bit<32>>(OUTPUT_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) nf_output_drops;

    /* hi: the epoch (0: none yet), lo: the seq of the last output forwarded; index slot*2 + parity */
    Register<dedup_pair_t, bit<32>>(OUTPUT_DEDUP_SIZE, {0, 0}) out_last;

    /* 0: forward; else the OUTPUT_DROP_* reason + 1 */
    RegisterAction<dedup_pair_t, bit<32>, bit<8>>(out_last) check_output = {
        void apply(inout dedup_pair_t last, out bit<8> verdict) {
            bit<32> epoch_ahead = ((bit<32>)hdr.nfc_shim.epoch - last.hi) & 0xFFFF;
            bit<32> seq_ahead = hdr.nfc_shim.seq - last.lo;
            if (last.hi == 0 || (epoch_ahead != 0 && epoch_ahead < 0x8000)) {
                last.hi = (bit<32>)hdr.nfc_shim.epoch;
                last.lo = hdr.nfc_shim.seq;
                verdict = 0;
            } else if (epoch_ahead == 0 && seq_ahead != 0 && seq_ahead < 0x80000000) {
                last.lo = hdr.nfc_shim.seq;
                verdict = 0;
            } else if (epoch_ahead == 0) {
                verdict = (bit<8>)OUTPUT_DROP_DUPLICATE + 1;
            } else {
                verdict = (bit<8>)OUTPUT_DROP_STALE_EPOCH + 1;
            }
        }
    };

    action forward_to_edge(bit<9> port, bit<48> dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.dst_addr = dst_mac;
    }

    action drop_no_route() {
        nf_port_drops.count(ig_intr_md.ingress_port);
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
        if (!meta.bypass && meta.port_role == PORT_ROLE_NF) {
            if (hdr.nfc_shim.isValid() && hdr.nfc_shim.kind == SHIM_KIND_OUTPUT
                    && hdr.ipv4.isValid()) {
                bit<8> verdict = (bit<8>)OUTPUT_DROP_BAD_SLOT + 1;
                if ((bit<32>)hdr.nfc_shim.slot < SLOT_COUNT) {
                    bit<32> index = ((bit<32>)hdr.nfc_shim.slot << 1)
                                    | (bit<32>)(hdr.nfc_shim.epoch & 1);
                    verdict = check_output.execute(index);
                }
                if (verdict == 0) {
                    hdr.ethernet.ether_type = hdr.nfc_shim.ether_type;
                    hdr.nfc_shim.setInvalid();
                    edge_forward.apply();
                } else {
                    nf_output_drops.count((bit<32>)(verdict - 1));
                    ig_dprsr_md.drop_ctl = 1;
                }
            } else {
                drop_no_route();
            }
        }
    }
}

#endif /* NFC_TNA_FORWARDING_P4 */
