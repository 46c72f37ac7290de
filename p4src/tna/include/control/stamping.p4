/* Stamping of packets entering a stage, per slot index (TNA; NOT compiled here): RegisterActions
   do each read-modify-write atomically. */
#ifndef NFC_TNA_STAMPING_P4
#define NFC_TNA_STAMPING_P4

control Stamping(inout headers_t hdr,
                 inout local_metadata_t meta,
                 inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    /* packets stamped per slot; a packet's number is slot_owner's seq_base + this (see v1model) */
    Register<bit<32>, slot_id_t>(SLOT_SPACE, 0) slot_seq;
    Register<bit<16>, slot_id_t>(SLOT_SPACE, 0) slot_epoch;
    Register<bit<16>, slot_id_t>(SLOT_SPACE, 0) slot_udp_epoch;
    Counter<bit<64>, slot_id_t>(SLOT_SPACE, CounterType_t.PACKETS_AND_BYTES) slot_traffic;

    RegisterAction<bit<32>, slot_id_t, bit<32>>(slot_seq) next_seq = {
        void apply(inout bit<32> value, out bit<32> result) {
            value = value + 1;
            result = value;
        }
    };

    RegisterAction<bit<16>, slot_id_t, bit<8>>(slot_epoch) check_epoch = {
        void apply(inout bit<16> value, out bit<8> result) {
            if (value != meta.epoch) {
                result = SHIM_FLAG_FIRST_OF_EPOCH;
            } else {
                result = 0;
            }
            value = meta.epoch;
        }
    };

    RegisterAction<bit<16>, slot_id_t, bit<1>>(slot_udp_epoch) check_udp_epoch = {
        void apply(inout bit<16> value, out bit<1> result) {
            if (value != meta.epoch) {
                result = 1;
            } else {
                result = 0;
            }
            value = meta.epoch;
        }
    };

    apply {
        if (meta.owned && !meta.marker) {  /* a move's marker goes to the owner as it is */
            hdr.nfc_shim.setValid();
            hdr.nfc_shim.seq = meta.seq_base + next_seq.execute(meta.slot_index);
            hdr.nfc_shim.flags = check_epoch.execute(meta.slot_index) | ((bit<8>)meta.reverse << 1);
            slot_traffic.count(meta.slot_index);
            hdr.nfc_shim.kind = SHIM_KIND_PRIMARY;
            hdr.nfc_shim.stage = meta.stage;
            hdr.nfc_shim.reserved = 0;
            hdr.nfc_shim.slot = meta.slot_index;
            hdr.nfc_shim.epoch = meta.epoch;
            hdr.nfc_shim.nf_id = meta.primary;
            hdr.nfc_shim.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_NFC;

            meta.new_flow.slot = meta.slot_index;
            meta.new_flow.src_addr = hdr.ipv4.src_addr;
            meta.new_flow.dst_addr = hdr.ipv4.dst_addr;
            meta.new_flow.src_port = meta.l4_src_port;
            meta.new_flow.dst_port = meta.l4_dst_port;
            meta.new_flow.protocol = hdr.ipv4.protocol;
            if (meta.chained) {
                /* reported when it entered its chain */
            } else if (hdr.tcp.isValid()) {
                if ((hdr.tcp.flags & TCP_FLAG_SYN) != 0 && (hdr.tcp.flags & TCP_FLAG_ACK) == 0) {
                    ig_dprsr_md.digest_type = DIGEST_TYPE_NEW_FLOW;
                }
            } else if (hdr.udp.isValid()) {
                if (check_udp_epoch.execute(meta.slot_index) == 1) {
                    ig_dprsr_md.digest_type = DIGEST_TYPE_NEW_FLOW;
                }
            }
        }
    }
}

#endif /* NFC_TNA_STAMPING_P4 */
