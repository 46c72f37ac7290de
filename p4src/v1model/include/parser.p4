/*
 * nfcluster v1model parser and deparser.
 *
 * CPU port: packet_out metadata, then Ethernet.  Every port: Ethernet, optionally the
 * nfcluster shim, IPv4 with its option words, then TCP or UDP when the packet is not a later
 * fragment (fragment offset 0: an unfragmented packet or a first fragment).  A later fragment
 * has no L4 header: SlotMap gives it the slot its first fragment had.
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
        /* ihl 5: no options; 6..15: ihl - 5 option words, one state each (no parser loop). */
        transition select(hdr.ipv4.ihl) {
            4w5: parse_l4;
            4w6 &&& 4w14: parse_ipv4_option_1;    /* 6, 7 */
            4w8 &&& 4w8: parse_ipv4_option_1;     /* 8..15 */
            default: accept;                      /* ihl < 5: malformed, no L4 */
        }
    }

    state parse_ipv4_option_1 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w6: parse_l4;
            default: parse_ipv4_option_2;
        }
    }

    state parse_ipv4_option_2 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w7: parse_l4;
            default: parse_ipv4_option_3;
        }
    }

    state parse_ipv4_option_3 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w8: parse_l4;
            default: parse_ipv4_option_4;
        }
    }

    state parse_ipv4_option_4 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w9: parse_l4;
            default: parse_ipv4_option_5;
        }
    }

    state parse_ipv4_option_5 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w10: parse_l4;
            default: parse_ipv4_option_6;
        }
    }

    state parse_ipv4_option_6 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w11: parse_l4;
            default: parse_ipv4_option_7;
        }
    }

    state parse_ipv4_option_7 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w12: parse_l4;
            default: parse_ipv4_option_8;
        }
    }

    state parse_ipv4_option_8 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w13: parse_l4;
            default: parse_ipv4_option_9;
        }
    }

    state parse_ipv4_option_9 {
        packet.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w14: parse_l4;
            default: parse_ipv4_option_10;
        }
    }

    state parse_ipv4_option_10 {
        packet.extract(hdr.ipv4_options.next);
        transition parse_l4;
    }

    state parse_l4 {
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (13w0, IP_PROTO_TCP): parse_tcp;
            (13w0, IP_PROTO_UDP): parse_udp;
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
        packet.emit(hdr.ipv4_options);
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
