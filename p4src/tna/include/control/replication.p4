/* Replication (TNA; NOT compiled here): multicast group per primary, rid tells copies apart. */
#ifndef NFC_TNA_REPLICATION_P4
#define NFC_TNA_REPLICATION_P4

control ReplicationIngress(inout local_metadata_t meta,
                           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (meta.owned) {
            ig_tm_md.mcast_grp_a = meta.group;
        }
    }
}

control ReplicationEgress(inout headers_t hdr,
                          in egress_intrinsic_metadata_t eg_intr_md,
                          inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    action set_nf_target(bit<16> nf_id, bit<48> nf_mac) {
        hdr.nfc_shim.nf_id = nf_id;
        hdr.ethernet.dst_addr = nf_mac;
    }

    action drop_untargeted() {
        eg_dprsr_md.drop_ctl = 1;
    }

    /* nf_port: exact on the egress port -> NF id and MAC. Controller: when an NF registers. */
    table nf_port {
        key = {
            eg_intr_md.egress_port: exact @name("port");
        }
        actions = {
            set_nf_target;
            @defaultonly drop_untargeted;
        }
        const default_action = drop_untargeted();
        size = NF_PORT_TABLE_SIZE;
    }

    apply {
        /* only replicas carry rid 1/2; packet-outs (rid 0) pass untouched */
        if (hdr.nfc_shim.isValid()) {
            bool known_replica = true;
            if (hdr.nfc_shim.kind == SHIM_KIND_MARKER) {
                /* a move's marker: to the slot's primary only, its kind kept */
                known_replica = eg_intr_md.egress_rid == REPLICA_RID_PRIMARY;
            } else if (eg_intr_md.egress_rid == REPLICA_RID_PRIMARY) {
                hdr.nfc_shim.kind = SHIM_KIND_PRIMARY;
            } else if (eg_intr_md.egress_rid == REPLICA_RID_BACKUP) {
                hdr.nfc_shim.kind = SHIM_KIND_BACKUP;
            } else {
                known_replica = false;
            }
            /* one application of nf_port: a table is applied in one place of the control graph */
            if (known_replica) {
                nf_port.apply();
            } else if (eg_intr_md.egress_rid != 0) {
                /* a group replica without a known rid: never send a stamp anywhere by accident
                   (as the v1model program does); rid 0 is no replica (a packet-out) */
                eg_dprsr_md.drop_ctl = 1;
            }
        }
    }
}

#endif /* NFC_TNA_REPLICATION_P4 */
