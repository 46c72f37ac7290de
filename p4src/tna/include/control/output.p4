/*
 * NF output, accepted once per input stamp from the stage the sending port's NF is in (TNA; NOT
 * compiled here). The output dedup keeps, per slot index (stage, slot) and epoch parity, the
 * (epoch, seq) of the last output accepted, in one pair register read and written by one
 * RegisterAction (the same rule as the v1model program's four-step version; docs/dataplane.md,
 * "Output dedup", "Service chains"). A watermark frame (OUTPUT flagged WATERMARK, no packet)
 * goes through the same RegisterAction and is then dropped, counted, never forwarded.
 */
#ifndef NFC_TNA_OUTPUT_P4
#define NFC_TNA_OUTPUT_P4

control NfOutputAcceptance(inout headers_t hdr,
                           inout local_metadata_t meta,
                           in ingress_intrinsic_metadata_t ig_intr_md,
                           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Counter<bit<64>, port_num_t>(PORT_COUNT, CounterType_t.PACKETS_AND_BYTES) nf_port_drops;
    Counter<bit<64>, bit<32>>(OUTPUT_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) nf_output_drops;

    /* hi: the epoch (0: none yet), lo: the seq of the last output accepted; index slot_index*2 + parity */
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

    action set_nf_stage(bit<8> stage) {
        meta.stage = stage;
    }

    /* nf_stage: exact on the ingress port -> its NF's stage. Controller: start-up (chains). */
    table nf_stage {
        key = {
            ig_intr_md.ingress_port: exact @name("port");
        }
        actions = {
            set_nf_stage;
        }
        default_action = set_nf_stage(0);
        size = NF_STAGE_TABLE_SIZE;
    }

    apply {
        if (!meta.bypass && meta.port_role == PORT_ROLE_NF) {
            bool is_watermark = hdr.nfc_shim.isValid() && hdr.nfc_shim.kind == SHIM_KIND_OUTPUT
                                && (hdr.nfc_shim.flags & SHIM_FLAG_WATERMARK) != 0;
            bool is_output = hdr.nfc_shim.isValid() && hdr.nfc_shim.kind == SHIM_KIND_OUTPUT
                             && (hdr.ipv4.isValid() || is_watermark);
            bool is_marker = hdr.nfc_shim.isValid() && hdr.nfc_shim.kind == SHIM_KIND_MARKER;
            if (is_output || is_marker) {
                nf_stage.apply();
                /* 0: accepted; otherwise the drop reason + 1 (one count call: Tofino wants
                   each extern used in one place) */
                bit<8> verdict = (bit<8>)OUTPUT_DROP_BAD_SLOT + 1;
                if (hdr.nfc_shim.stage != meta.stage) {
                    verdict = (bit<8>)OUTPUT_DROP_WRONG_STAGE + 1;
                } else if ((hdr.nfc_shim.slot >> SLOT_BITS) == (bit<16>)meta.stage) {
                    if (is_marker) {
                        verdict = 0;  /* a move's marker (see v1model): no dedup, not output */
                    } else {
                        bit<32> index = ((bit<32>)hdr.nfc_shim.slot << 1)
                                        | (bit<32>)(hdr.nfc_shim.epoch & 1);
                        verdict = check_output.execute(index);
                        if (verdict == 0 && is_watermark) {
                            /* it moved the watermark: nothing to forward */
                            verdict = (bit<8>)OUTPUT_DROP_WATERMARK + 1;
                        }
                    }
                }
                if (verdict == 0 && is_marker) {
                    /* SlotMap finds the slot's owner, Stamping skips it */
                    meta.marker = true;
                    meta.slot = hdr.nfc_shim.slot & (slot_id_t)(SLOT_COUNT - 1);
                } else if (verdict == 0) {
                    meta.accepted = true;
                    meta.slot = hdr.nfc_shim.slot & (slot_id_t)(SLOT_COUNT - 1);
                    if ((hdr.nfc_shim.flags & SHIM_FLAG_REVERSE) != 0) {
                        meta.reverse = 1;
                    }
                    hdr.ethernet.ether_type = hdr.nfc_shim.ether_type;
                    hdr.nfc_shim.setInvalid();
                } else {
                    meta.bypass = true;
                    nf_output_drops.count((bit<32>)(verdict - 1));
                    ig_dprsr_md.drop_ctl = 1;
                }
            } else {
                meta.bypass = true;
                nf_port_drops.count(ig_intr_md.ingress_port);
                ig_dprsr_md.drop_ctl = 1;
            }
        }
    }
}

#endif /* NFC_TNA_OUTPUT_P4 */
