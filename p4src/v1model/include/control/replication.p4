/*
 * Replication of stamped packets to the slot's primary and backup NF.
 *
 * Ingress hands the packet to the multicast group of the slot's primary; the controller
 * programs that group as {(primary port, rid 1), (backup port, rid 2)}. Egress tells the two
 * copies apart by egress_rid, sets the shim's kind, and addresses the copy to the NF on the
 * egress port (shim.nf_id and the Ethernet destination).
 */
#ifndef NFC_V1MODEL_REPLICATION_P4
#define NFC_V1MODEL_REPLICATION_P4

control ReplicationIngress(inout headers_t hdr,
                           inout local_metadata_t meta,
                           inout standard_metadata_t standard_metadata) {
    apply {
        if (meta.owned) {
            standard_metadata.mcast_grp = meta.group;
        }
    }
}

control ReplicationEgress(inout headers_t hdr,
                          inout local_metadata_t meta,
                          inout standard_metadata_t standard_metadata) {

    action set_nf_target(bit<16> nf_id, bit<48> nf_mac) {
        hdr.nfc_shim.nf_id = nf_id;
        hdr.ethernet.dst_addr = nf_mac;
    }

    action drop_untargeted() {
        mark_to_drop(standard_metadata);
    }

    /*
     * nf_port: exact on the egress port -> the NF attached to it (nf_id and MAC address).
     * Written by the controller when an NF instance registers (and removed when it leaves).
     * A copy toward a port with no NF is dropped.
     */
    table nf_port {
        key = {
            standard_metadata.egress_port: exact @name("port");
        }
        actions = {
            set_nf_target;
            @defaultonly drop_untargeted;
        }
        const default_action = drop_untargeted();
        size = NF_PORT_TABLE_SIZE;
    }

    apply {
        if (meta.owned && hdr.nfc_shim.isValid()) {
            bool known_replica = true;
            if (hdr.nfc_shim.kind == SHIM_KIND_MARKER) {
                /* a move's marker: to the slot's primary only, its kind kept */
                known_replica = standard_metadata.egress_rid == REPLICA_RID_PRIMARY;
            } else if (standard_metadata.egress_rid == REPLICA_RID_PRIMARY) {
                hdr.nfc_shim.kind = SHIM_KIND_PRIMARY;
            } else if (standard_metadata.egress_rid == REPLICA_RID_BACKUP) {
                hdr.nfc_shim.kind = SHIM_KIND_BACKUP;
            } else {
                known_replica = false;
            }
            /* nf_port is applied in one place only: p4c's BMv2 back end rejects a table
               applied on two paths of the control graph */
            if (known_replica) {
                nf_port.apply();
            } else {
                /* a group replica without a known rid: never send a stamp anywhere by accident */
                mark_to_drop(standard_metadata);
            }
        }
    }
}

#endif /* NFC_V1MODEL_REPLICATION_P4 */
