/* Packet-in / packet-out (TNA; NOT compiled here). Ingress fills packet_in itself. Non-IPv4 edge
   traffic: edge_punt, punt_meter and punt_drops as in v1model. */
#ifndef NFC_TNA_PACKETIO_P4
#define NFC_TNA_PACKETIO_P4

control PacketIoIngress(inout headers_t hdr,
                        inout local_metadata_t meta,
                        in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md,
                        inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    action to_cpu() {
        ig_tm_md.ucast_egress_port = TNA_CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = ig_intr_md.ingress_port;
        hdr.packet_in._pad = 0;
        meta.bypass = true;
    }

    Counter<bit<64>, bit<32>>(PUNT_DROP_REASONS, CounterType_t.PACKETS_AND_BYTES) punt_drops;
    Meter<bit<32>>(1, MeterType_t.PACKETS) punt_meter;

    /* TNA's colours are green 0, yellow 1, red 3 (MeterColor_t); v1model's red is 2. */
    action punt_to_cpu() {
        meta.punt_color = (bit<2>)punt_meter.execute(0);
        to_cpu();
    }

    action drop_non_ipv4() {
        punt_drops.count(PUNT_DROP_NO_HANDLER);
        ig_dprsr_md.drop_ctl = 1;
    }

    /* edge_punt: keyless; drop_non_ipv4 until a controller with a packet-in handler sets punt_to_cpu. */
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
            ig_tm_md.ucast_egress_port = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            meta.bypass = true;
            if (ig_tm_md.ucast_egress_port == TNA_CPU_PORT) {
                to_cpu();
            }
        } else if (!meta.bypass && meta.port_role == PORT_ROLE_EDGE && !hdr.ipv4.isValid()) {
            meta.punt_color = METER_GREEN;
            edge_punt.apply();
            meta.bypass = true;
            if (meta.punt_color == (bit<2>)3) {
                punt_drops.count(PUNT_DROP_OVER_RATE);
                ig_dprsr_md.drop_ctl = 1;
            }
        }
    }
}

#endif /* NFC_TNA_PACKETIO_P4 */
