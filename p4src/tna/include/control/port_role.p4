/* Port classification (TNA; NOT compiled here). Same table and action names as v1model. */
#ifndef NFC_TNA_PORT_ROLE_P4
#define NFC_TNA_PORT_ROLE_P4

control PortClassifier(inout headers_t hdr,
                       inout local_metadata_t meta,
                       in ingress_intrinsic_metadata_t ig_intr_md,
                       inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    action set_port_role(bit<8> role) {
        meta.port_role = role;
    }

    /* port_role: exact on the ingress port -> role. Written by the controller at start-up. */
    table port_role {
        key = {
            ig_intr_md.ingress_port: exact @name("port");
        }
        actions = {
            set_port_role;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_ROLE_TABLE_SIZE;
    }

    apply {
        meta.port_role = PORT_ROLE_UNKNOWN;
        meta.bypass = false;
        meta.owned = false;
        meta.accepted = false;
        meta.chained = false;
        meta.rehash = false;
        meta.reverse = 0;
        meta.stage = 0;
        port_role.apply();
        /* packet-out (controller-originated) is handled by PacketIoIngress whatever the role */
        if (!hdr.packet_out.isValid()) {
            if (meta.port_role == PORT_ROLE_EDGE && hdr.nfc_shim.isValid()) {
                /* a shim never enters from the edge: nobody outside may forge stamps */
                ig_dprsr_md.drop_ctl = 1;
                meta.bypass = true;
            } else if (meta.port_role != PORT_ROLE_EDGE && meta.port_role != PORT_ROLE_NF) {
                /* unclassified port, or a CPU-role port without packet-out metadata */
                ig_dprsr_md.drop_ctl = 1;
                meta.bypass = true;
            }
        }
    }
}

#endif /* NFC_TNA_PORT_ROLE_P4 */
