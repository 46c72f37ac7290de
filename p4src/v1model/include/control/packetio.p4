/*
 * Packet-in and packet-out through the CPU port (@controller_header metadata).
 *
 * Packet-out: the payload leaves on packet_out.egress_port untouched by the rest of the
 * pipeline (egress_port == CPU_PORT loops it straight back as a packet-in: a pipeline probe).
 * Packet-in: non-IPv4 traffic from edge ports (ARP and the like) is punted to the controller;
 * every packet leaving on CPU_PORT carries packet_in metadata with its ingress port.
 */
#ifndef NFC_V1MODEL_PACKETIO_P4
#define NFC_V1MODEL_PACKETIO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.bypass = true;
        } else if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && !hdr.ipv4.isValid()) {
            standard_metadata.egress_spec = CPU_PORT;
            meta.bypass = true;
        }
    }
}

control PacketIoEgress(inout headers_t hdr,
                       inout local_metadata_t meta,
                       inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

#endif /* NFC_V1MODEL_PACKETIO_P4 */
