/*
 * Packet-in and packet-out through the CPU port (@controller_header metadata).
 *
 * Packet-out: the payload leaves on packet_out.egress_port untouched by the rest of the
 * pipeline (egress_port == CPU_PORT loops it straight back as a packet-in: a pipeline probe).
 * Packet-in: non-IPv4 traffic from edge ports (ARP and the like) is dropped and counted
 * unless the controller, having a packet-in handler, set edge_punt's default action to
 * punt_to_cpu; the punt is then rate-limited by punt_meter (red: dropped and counted).
 * Every packet leaving on CPU_PORT carries packet_in metadata with its ingress port.
 */
#ifndef NFC_V1MODEL_PACKETIO_P4
#define NFC_V1MODEL_PACKETIO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    /* Non-IPv4 edge packets dropped instead of punted, per reason (PUNT_DROP_*). */
    counter(PUNT_DROP_REASONS, CounterType.packets_and_bytes) punt_drops;
    /* Rate of the punt; configured by the controller with punt_to_cpu (unconfigured: green). */
    meter(1, MeterType.packets) punt_meter;

    action punt_to_cpu() {
        punt_meter.execute_meter((bit<32>)0, meta.punt_color);
        standard_metadata.egress_spec = CPU_PORT;
    }

    action drop_non_ipv4() {
        punt_drops.count(PUNT_DROP_NO_HANDLER);
        mark_to_drop(standard_metadata);
    }

    /*
     * edge_punt: keyless; what happens to a non-IPv4 edge packet.  The default, drop_non_ipv4,
     * stands until a controller with a packet-in handler sets punt_to_cpu (and punt_meter).
     */
    table edge_punt {
        key = { }
        actions = {
            punt_to_cpu;
            drop_non_ipv4;
        }
        default_action = drop_non_ipv4();
        size = 1;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.bypass = true;
        } else if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && !hdr.ipv4.isValid()) {
            meta.bypass = true;
            meta.punt_color = METER_GREEN;
            edge_punt.apply();
            if (meta.punt_color == METER_RED) {
                punt_drops.count(PUNT_DROP_OVER_RATE);
                mark_to_drop(standard_metadata);
            }
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
