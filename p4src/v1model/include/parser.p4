/*
 * nfcluster v1model parser and deparser.
 *
 * CPU port: packet_out metadata, then Ethernet.  Every port: Ethernet, optionally the
 * nfcluster shim, IPv4, then TCP or UDP when the IPv4 header has no options and the packet
 * is not a fragment (otherwise the slot is computed from the addresses alone).
 * The parser has no loops.
 */
#ifndef NFC_V1MODEL_PARSER_P4
#define NFC_V1MODEL_PARSER_P4

parser NfcParser(packet_in packet,
                 out headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_NFC: parse_nfc_shim;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_nfc_shim {
        packet.extract(hdr.nfc_shim);
        transition select(hdr.nfc_shim.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        /* L4 only without options (ihl == 5) and only in unfragmented packets (MF, the low flag bit, == 0; offset == 0). */
        transition select(hdr.ipv4.ihl, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_TCP): parse_tcp;
            (4w5, 3w0 &&& 3w1, 13w0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }
}

control NfcDeparser(packet_out packet, in headers_t hdr) {
    apply {
        /* packet_out is never emitted: it only exists between the controller and the ingress. */
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.nfc_shim);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
    }
}

/* Nothing in IPv4 is rewritten by the switch, so no checksum is verified or updated. */
control NfcVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

control NfcComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply { }
}

#endif /* NFC_V1MODEL_PARSER_P4 */
