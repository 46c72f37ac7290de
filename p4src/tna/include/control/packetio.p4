/* Packet-in / packet-out (TNA; NOT compiled here). Ingress fills packet_in itself. */
#ifndef NFC_TNA_PACKETIO_P4
#define NFC_TNA_PACKETIO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    action to_cpu() {
        ig_tm_md.ucast_egress_port = TNA_CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = ig_intr_md.ingress_port;
        hdr.packet_in._pad = 0;
        meta.bypass = true;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            ig_tm_md.ucast_egress_port = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.bypass = true;
            if (ig_tm_md.ucast_egress_port == TNA_CPU_PORT) {
                to_cpu();
            }
        } else if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && !hdr.ipv4.isValid()) {
            to_cpu();
        }
    }
}

#endif /* NFC_TNA_PACKETIO_P4 */
