/* Slot computation and ownership (TNA; NOT compiled here). Same hash input as v1model. */
#ifndef NFC_TNA_SLOT_P4
#define NFC_TNA_SLOT_P4

control SlotMap(inout headers_t hdr,
                inout local_metadata_t meta,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Hash<bit<16>>(HashAlgorithm_t.CRC16) slot_hash;
    Counter<bit<64>, slot_id_t>(SLOT_COUNT, CounterType_t.PACKETS_AND_BYTES) unowned_drops;

    action set_replica_group(bit<16> group, bit<16> epoch, bit<16> primary) {
        meta.owned = true;
        meta.group = group;
        meta.epoch = epoch;
        meta.primary = primary;
    }

    action drop_unowned() {
        meta.owned = false;
        meta.bypass = true;
        unowned_drops.count(meta.slot);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* slot_owner: exact on the slot -> group, epoch, primary. Controller: start-up, every move. */
    table slot_owner {
        key = {
            meta.slot: exact @name("slot");
        }
        actions = {
            set_replica_group;
            @defaultonly drop_unowned;
        }
        const default_action = drop_unowned();
        size = SLOT_OWNER_TABLE_SIZE;
    }

    apply {
        if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && hdr.ipv4.isValid()) {
            ipv4_addr_t lo_addr = hdr.ipv4.src_addr;
            ipv4_addr_t hi_addr = hdr.ipv4.dst_addr;
            bit<16> lo_port = meta.l4_src_port;
            bit<16> hi_port = meta.l4_dst_port;
            if (hdr.ipv4.src_addr > hdr.ipv4.dst_addr
                    || (hdr.ipv4.src_addr == hdr.ipv4.dst_addr
                        && meta.l4_src_port > meta.l4_dst_port)) {
                lo_addr = hdr.ipv4.dst_addr;
                hi_addr = hdr.ipv4.src_addr;
                lo_port = meta.l4_dst_port;
                hi_port = meta.l4_src_port;
            }
            bit<16> h = slot_hash.get({ lo_addr, hi_addr, lo_port, hi_port, hdr.ipv4.protocol });
            meta.slot = h & (bit<16>)(SLOT_COUNT - 1);
            slot_owner.apply();
        }
    }
}

#endif /* NFC_TNA_SLOT_P4 */
