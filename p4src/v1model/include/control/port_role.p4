/*
 * Port classification: which role (edge, NF, CPU) the ingress port has.
 */
#ifndef NFC_V1MODEL_PORT_ROLE_P4
#define NFC_V1MODEL_PORT_ROLE_P4

control PortClassifier(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    action set_port_role(bit<8> role) {
        meta.port_role = role;
    }

    /*
     * port_role: exact on the ingress port -> the port's role (PORT_ROLE_*).
     * Written by the controller at start-up from its configuration (one entry per edge, NF
     * and CPU port) and when an NF is added or removed. A miss leaves the role UNKNOWN.
     */
    table port_role {
        key = {
            standard_metadata.ingress_port: exact @name("port");
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
                mark_to_drop(standard_metadata);
                meta.bypass = true;
            } else if (meta.port_role != PORT_ROLE_EDGE && meta.port_role != PORT_ROLE_NF) {
                /* unclassified port, or a CPU-role port without packet-out metadata */
                mark_to_drop(standard_metadata);
                meta.bypass = true;
            }
        }
    }
}

#endif /* NFC_V1MODEL_PORT_ROLE_P4 */
