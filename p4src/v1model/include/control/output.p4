/*
 * NF output: accepted once per input stamp, from the stage the sending port's NF is in.
 *
 * From an NF port only shim kind OUTPUT carrying IPv4 (or flagged WATERMARK: output without a
 * packet, which moves the dedup watermark and is never forwarded) is accepted, and only for the stage of
 * the NF on that port (nf_stage): output claiming another stage is dropped and counted in
 * nf_output_drops[OUTPUT_DROP_WRONG_STAGE]. The output dedup then lets each input's output
 * through once: per slot index (stage, slot) the switch remembers the (epoch, seq) of the last
 * output it forwarded, for the slot's current epoch and for the previous one (during a move the
 * old owner may still release output of its epoch after the new owner's first output); the two
 * are told apart by the epoch's parity (epochs run 1..65534, so consecutive ones alternate).
 * Output whose seq is not after the remembered one, or of an older epoch, is dropped and
 * counted in nf_output_drops: this is what lets a promoted backup send again the output its
 * dead primary may or may not have sent. Accepted output loses its shim (the original
 * EtherType restored) and carries its stage, slot and direction in metadata to ChainSteering,
 * which sends it on to the next stage or to the edge. Anything else from an NF port is dropped
 * and counted per ingress port in nf_port_drops. A marker (shim kind MARKER, sent by an NF
 * that releases a slot, after its last output) is not output: it is marked for SlotMap, which
 * finds the slot's owner, and goes, unstamped, to that owner's primary only; a marker for
 * another stage is dropped and counted like wrong-stage output. The rule is in
 * docs/dataplane.md ("Output dedup", "Service chains", "Move markers").
 */
#ifndef NFC_V1MODEL_OUTPUT_P4
#define NFC_V1MODEL_OUTPUT_P4

control NfOutputAcceptance(inout headers_t hdr,
                           inout local_metadata_t meta,
                           inout standard_metadata_t standard_metadata) {

    /* Packets from NF ports that are not OUTPUT carrying IPv4 (or a watermark), per ingress port. */
    counter(PORT_COUNT, CounterType.packets_and_bytes) nf_port_drops;

    /*
     * Output dedup state (written only here, by accepted output): per slot index and epoch
     * parity, the epoch and seq of the last output accepted (index slot_index * 2 + epoch % 2;
     * epoch 0: none yet). The current epoch and the previous one have different parities.
     */
    register<bit<16>>(OUTPUT_DEDUP_SIZE) out_epoch;
    register<bit<32>>(OUTPUT_DEDUP_SIZE) out_seq;
    /* Output dropped, per reason: OUTPUT_DROP_DUPLICATE, _STALE_EPOCH, _BAD_SLOT, _WRONG_STAGE. */
    counter(OUTPUT_DROP_REASONS, CounterType.packets_and_bytes) nf_output_drops;

    action set_nf_stage(bit<8> stage) {
        meta.stage = stage;
    }

    /*
     * nf_stage: exact on the ingress port -> the stage of the NF on that port.
     * Written by the controller at start-up, one entry per NF port whose NF is in a stage
     * other than 0 (a switch without chains needs none: the default is stage 0).
     */
    table nf_stage {
        key = {
            standard_metadata.ingress_port: exact @name("port");
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
                /* nf_stage is applied in one place: p4c's BMv2 back end rejects a table
                   applied on two paths of the control graph */
                nf_stage.apply();
                bool first = false;
                bit<32> reason = OUTPUT_DROP_BAD_SLOT;
                if (hdr.nfc_shim.stage != meta.stage) {
                    reason = OUTPUT_DROP_WRONG_STAGE;
                } else if ((hdr.nfc_shim.slot >> SLOT_BITS) == (bit<16>)meta.stage
                           && is_marker) {
                    /* a move's marker: no dedup, not output; SlotMap finds the slot's owner,
                       Stamping leaves it alone */
                    meta.marker = true;
                    meta.slot = hdr.nfc_shim.slot & (slot_id_t)(SLOT_COUNT - 1);
                } else if ((hdr.nfc_shim.slot >> SLOT_BITS) == (bit<16>)meta.stage) {
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
                if (first && is_watermark) {
                    /* it moved the watermark: nothing to forward */
                    first = false;
                    reason = OUTPUT_DROP_WATERMARK;
                }
                if (first) {
                    meta.accepted = true;
                    meta.slot = hdr.nfc_shim.slot & (slot_id_t)(SLOT_COUNT - 1);
                    if ((hdr.nfc_shim.flags & SHIM_FLAG_REVERSE) != 0) {
                        meta.reverse = 1;
                    }
                    hdr.ethernet.ether_type = hdr.nfc_shim.ether_type;
                    hdr.nfc_shim.setInvalid();
                } else if (!meta.marker) {  /* (a marker goes on to SlotMap) */
                    meta.bypass = true;
                    nf_output_drops.count(reason);
                    mark_to_drop(standard_metadata);
                }
            } else {
                meta.bypass = true;
                nf_port_drops.count((bit<32>)standard_metadata.ingress_port);
                mark_to_drop(standard_metadata);
            }
        }
    }
}

#endif /* NFC_V1MODEL_OUTPUT_P4 */
