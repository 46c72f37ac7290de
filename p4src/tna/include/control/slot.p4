/* Slot computation and ownership (TNA; NOT compiled here). Same hash input, fragment memory
   and drop counters as v1model (the memory cell is one pair register: hi = slot + 1, lo =
   identification, read or written by one RegisterAction). */
#ifndef NFC_TNA_SLOT_P4
#define NFC_TNA_SLOT_P4

control SlotMap(inout headers_t hdr,
                inout local_metadata_t meta,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Hash<bit<16>>(HashAlgorithm_t.CRC16) slot_hash;
    Counter<bit<64>, slot_id_t>(SLOT_SPACE, CounterType_t.PACKETS_AND_BYTES) unowned_drops;
    Counter<bit<64>, bit<32>>(SLOT_MAP_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) slot_map_drops;
    Hash<bit<16>>(HashAlgorithm_t.CRC16) fragment_hash;
    Register<dedup_pair_t, bit<32>>(FRAGMENT_MEMORY_SIZE, {0, 0}) fragment_slot;

    /* A first fragment: remember its slot. */
    RegisterAction<dedup_pair_t, bit<32>, bit<32>>(fragment_slot) remember_fragment = {
        void apply(inout dedup_pair_t cell) {
            cell.hi = (bit<32>)meta.slot + 1;
            cell.lo = (bit<32>)hdr.ipv4.identification;
        }
    };
    /* A later fragment: its first fragment's slot + 1, or 0 when the cell holds another datagram. */
    RegisterAction<dedup_pair_t, bit<32>, bit<32>>(fragment_slot) recall_fragment = {
        void apply(inout dedup_pair_t cell, out bit<32> slot_plus_one) {
            if (cell.lo == (bit<32>)hdr.ipv4.identification) {
                slot_plus_one = cell.hi;
            } else {
                slot_plus_one = 0;
            }
        }
    };

    action set_replica_group(bit<16> group, bit<16> epoch, bit<16> primary, bit<32> seq_base) {
        meta.owned = true;
        meta.group = group;
        meta.epoch = epoch;
        meta.primary = primary;
        meta.seq_base = seq_base;
    }

    action drop_unowned() {
        meta.owned = false;
        meta.bypass = true;
        unowned_drops.count(meta.slot_index);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* slot_owner: exact on (stage, slot) -> group, epoch, primary, seq_base. Controller: start-up,
       every move (keeping seq_base), and every reconcile (seq_base resumes the numbering after a
       switch restart; see v1model). */
    table slot_owner {
        key = {
            meta.stage: exact @name("stage");
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
        bool from_edge = !meta.bypass && meta.port_role == PORT_ROLE_EDGE && hdr.ipv4.isValid();
        if (from_edge || meta.chained || meta.marker) {
            /* carried from the stage before unless that stage rewrites addresses (see v1model) */
            bool carried = meta.marker
                           || (meta.chained && !(meta.rehash && hdr.ipv4.frag_offset == 0));
            bit<32> cell = (bit<32>)fragment_hash.get({ hdr.ipv4.src_addr, hdr.ipv4.dst_addr,
                                                        hdr.ipv4.protocol, hdr.ipv4.identification })
                           & (FRAGMENT_MEMORY_SIZE - 1);
            if (from_edge && hdr.ipv4.frag_offset != 0) {
                bit<32> slot_plus_one = recall_fragment.execute(cell);
                if (slot_plus_one != 0) {
                    meta.slot = (slot_id_t)(slot_plus_one - 1);
                } else {
                    meta.bypass = true;
                    slot_map_drops.count(SLOT_MAP_DROP_ORPHAN_FRAGMENT);
                    ig_dprsr_md.drop_ctl = 1;
                }
            } else if (!carried) {
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
                if (from_edge && (hdr.ipv4.flags & IPV4_FLAG_MORE_FRAGMENTS) != 0) {
                    remember_fragment.execute(cell);
                }
            }
            if (!meta.bypass) {
                meta.slot_index = ((slot_id_t)meta.stage << SLOT_BITS) | meta.slot;
                slot_owner.apply();
            }
        }
    }
}

#endif /* NFC_TNA_SLOT_P4 */
