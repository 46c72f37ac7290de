/*
 * Slot computation and ownership, for packets from the edge and NF output entering its next
 * stage (ChainSteering).
 *
 * The slot is a CRC-16 of the 5-tuple with the two endpoints put in a canonical order
 * (the smaller (address, port) first), so both directions of a connection share a slot:
 *   slot = crc16(lo_addr, hi_addr, lo_port, hi_port, protocol) mod SLOT_COUNT
 * Ports are 0 when the packet has no TCP/UDP header (ICMP and other protocols).
 *
 * IPv4 fragments: the first fragment carries the ports, so it gets the flow's slot like any
 * unfragmented packet, and SlotMap remembers that slot under (addresses, protocol,
 * identification); the later fragments (offset > 0, no ports) take the remembered slot, so
 * every packet of a flow lands in one slot whether it was fragmented or not.  A later
 * fragment whose first fragment was not seen (reordered ahead of it, or its cell taken by
 * another datagram) is dropped and counted in slot_map_drops[SLOT_MAP_DROP_ORPHAN_FRAGMENT].
 */
#ifndef NFC_V1MODEL_SLOT_P4
#define NFC_V1MODEL_SLOT_P4

control SlotMap(inout headers_t hdr,
                inout local_metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    /* Packets dropped because their slot has no owner in the stage they enter, per slot index. */
    counter(SLOT_SPACE, CounterType.packets_and_bytes) unowned_drops;
    /* Edge packets dropped before a slot was found, per reason (SLOT_MAP_DROP_*). */
    counter(SLOT_MAP_DROP_REASONS, CounterType.packets_and_bytes) slot_map_drops;
    /*
     * The fragment memory, indexed by crc16(src, dst, protocol, identification) mod
     * FRAGMENT_MEMORY_SIZE: the identification of the datagram whose first fragment last used
     * the cell, and its slot + 1 (0: never used).  Written by first fragments only.
     */
    register<bit<16>>(FRAGMENT_MEMORY_SIZE) fragment_ident;
    register<bit<32>>(FRAGMENT_MEMORY_SIZE) fragment_slot;

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
        unowned_drops.count((bit<32>)meta.slot_index);
        mark_to_drop(standard_metadata);
    }

    /*
     * slot_owner: exact on (stage, slot) -> the replica (multicast) group of the slot's primary
     * in that stage, the slot's epoch, the primary's nf_id and the slot's seq_base (Stamping
     * stamps seq_base + the number of packets it stamped in the slot).
     * Written by the controller for every slot of every stage at start-up, and rewritten (one
     * atomic MODIFY, epoch + 1, seq_base kept) on every migration. seq_base is 0 until the
     * switch restarts: the reconcile that follows sets it so that the numbering goes on after
     * the highest number an NF received (a table entry, which every P4Runtime server serves,
     * where BMv2's serves no register). A miss drops and counts the packet.
     */
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
            /* output going on to its next stage keeps its slot, unless the stage it leaves
               rewrites addresses (then, but for a later fragment, which has no ports, the
               slot is computed again from the rewritten headers) */
            bool carried = meta.marker
                           || (meta.chained && !(meta.rehash && hdr.ipv4.frag_offset == 0));
            bit<32> cell = 0;
            if (from_edge) {
                hash(cell,
                     HashAlgorithm.crc16,
                     (bit<32>)0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol, hdr.ipv4.identification },
                     (bit<32>)FRAGMENT_MEMORY_SIZE);
            }
            if (from_edge && hdr.ipv4.frag_offset != 0) {
                /* A later fragment: the slot of its datagram's first fragment. */
                bit<16> ident;
                bit<32> slot_plus_one;
                fragment_ident.read(ident, cell);
                fragment_slot.read(slot_plus_one, cell);
                if (slot_plus_one != 0 && ident == hdr.ipv4.identification) {
                    meta.slot = (slot_id_t)(slot_plus_one - 1);
                } else {
                    meta.bypass = true;
                    slot_map_drops.count(SLOT_MAP_DROP_ORPHAN_FRAGMENT);
                    mark_to_drop(standard_metadata);
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
                hash(meta.slot,
                     HashAlgorithm.crc16,
                     (bit<16>)0,
                     { lo_addr, hi_addr, lo_port, hi_port, hdr.ipv4.protocol },
                     (bit<32>)SLOT_COUNT);
                if (from_edge && (hdr.ipv4.flags & IPV4_FLAG_MORE_FRAGMENTS) != 0) {
                    /* A first fragment: remember its slot for the later ones. */
                    fragment_ident.write(cell, hdr.ipv4.identification);
                    fragment_slot.write(cell, (bit<32>)meta.slot + 1);
                }
            }
            if (!meta.bypass) {
                meta.slot_index = ((slot_id_t)meta.stage << SLOT_BITS) | meta.slot;
                slot_owner.apply();
            }
        }
    }
}

#endif /* NFC_V1MODEL_SLOT_P4 */
