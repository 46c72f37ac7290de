/*
 * Stamping of owned packets entering a stage (from the edge, or NF output going on to its next
 * stage): per (stage, slot) sequence number, first-of-epoch flag, traffic counter, the shim
 * header; and, for packets from the edge, the new-flow digest. Every per-slot cell is at the
 * slot index stage << SLOT_BITS | slot.
 */
#ifndef NFC_V1MODEL_STAMPING_P4
#define NFC_V1MODEL_STAMPING_P4

control Stamping(inout headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    /* Packets stamped in each slot, mod 2^32 (the same count as slot_traffic's packets): a
       packet is stamped seq_base (from slot_owner) + this count, so the first gets seq_base + 1.
       Only the pipeline writes it: the controller reads slot_traffic and writes seq_base. */
    register<bit<32>>(SLOT_SPACE) slot_seq;
    /* Epoch of the last packet stamped in each slot (epochs start at 1; 0: never stamped). */
    register<bit<16>>(SLOT_SPACE) slot_epoch;
    /* Epoch in which each slot last reported a UDP flow (first UDP packet of an epoch). */
    register<bit<16>>(SLOT_SPACE) slot_udp_epoch;
    /* Packets and bytes (as received) of every owned packet, per slot index. */
    counter(SLOT_SPACE, CounterType.packets_and_bytes) slot_traffic;

    apply {
        if (meta.owned && !meta.marker) {  /* a move's marker goes to the owner as it is */
            bit<32> index = (bit<32>)meta.slot_index;
            seq_num_t seq;
            epoch_t last_epoch;
            epoch_t last_udp_epoch;
            bit<8> flags = 0;

            slot_seq.read(seq, index);
            seq = seq + 1;
            slot_seq.write(index, seq);

            slot_epoch.read(last_epoch, index);
            if (last_epoch != meta.epoch) {
                flags = flags | SHIM_FLAG_FIRST_OF_EPOCH;
                slot_epoch.write(index, meta.epoch);
            }
            if (meta.reverse == 1) {
                flags = flags | SHIM_FLAG_REVERSE;
            }

            slot_traffic.count(index);

            hdr.nfc_shim.setValid();
            hdr.nfc_shim.kind = SHIM_KIND_PRIMARY;   /* egress sets the kind per copy */
            hdr.nfc_shim.flags = flags;
            hdr.nfc_shim.stage = meta.stage;
            hdr.nfc_shim.reserved = 0;
            hdr.nfc_shim.slot = meta.slot_index;
            hdr.nfc_shim.epoch = meta.epoch;
            hdr.nfc_shim.nf_id = meta.primary;      /* egress sets the target per copy */
            hdr.nfc_shim.seq = meta.seq_base + seq;
            hdr.nfc_shim.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_NFC;

            meta.new_flow.slot = meta.slot_index;
            meta.new_flow.src_addr = hdr.ipv4.src_addr;
            meta.new_flow.dst_addr = hdr.ipv4.dst_addr;
            meta.new_flow.src_port = meta.l4_src_port;
            meta.new_flow.dst_port = meta.l4_dst_port;
            meta.new_flow.protocol = hdr.ipv4.protocol;
            bool report = false;
            if (meta.chained) {
                report = false;  /* reported when it entered its chain */
            } else if (hdr.tcp.isValid()) {
                report = (hdr.tcp.flags & TCP_FLAG_SYN) != 0 && (hdr.tcp.flags & TCP_FLAG_ACK) == 0;
            } else if (hdr.udp.isValid()) {
                slot_udp_epoch.read(last_udp_epoch, index);
                if (last_udp_epoch != meta.epoch) {
                    slot_udp_epoch.write(index, meta.epoch);
                    report = true;
                }
            }
            if (report) {
                digest<new_flow_t>(DIGEST_RECEIVER_NEW_FLOW, meta.new_flow);
            }
        }
    }
}

#endif /* NFC_V1MODEL_STAMPING_P4 */
