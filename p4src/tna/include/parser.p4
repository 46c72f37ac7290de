/* nfcluster TNA parsers and deparsers (NOT compiled here: no Tofino SDE). */
#ifndef NFC_TNA_PARSER_P4
#define NFC_TNA_PARSER_P4

/* Every field of the parsers' `out` metadata is set in the start state, which every path to
   accept goes through (p4c: "out parameter 'meta' may be uninitialized when the parser
   terminates" otherwise; Tofino does not zero PHV containers). A field added to
   local_metadata_t must be added here too: `p4sim check --arch tna` reports it. */
#define NFC_INIT_META(m)              \
    m.port_role = PORT_ROLE_UNKNOWN;  \
    m.bypass = false;                 \
    m.owned = false;                  \
    m.l4_src_port = 0;                \
    m.l4_dst_port = 0;                \
    m.slot = 0;                       \
    m.slot_index = 0;                 \
    m.stage = 0;                      \
    m.reverse = 0;                    \
    m.accepted = false;               \
    m.chained = false;                \
    m.rehash = false;                 \
    m.marker = false;                 \
    m.group = 0;                      \
    m.epoch = 0;                      \
    m.primary = 0;                    \
    m.seq_base = 0;                   \
    m.new_flow = {0, 0, 0, 0, 0, 0}; \
    m.punt_color = 0;

parser NfcIngressParser(packet_in pkt,
                        out headers_t hdr,
                        out local_metadata_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        NFC_INIT_META(meta)
        transition select(ig_intr_md.ingress_port) {
            TNA_CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_NFC: parse_nfc_shim;
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_nfc_shim {
        pkt.extract(hdr.nfc_shim);
        transition select(hdr.nfc_shim.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    /* IPv4 options and fragments as in the v1model parser (one state per option word). */
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl) {
            4w5: parse_l4;
            4w6 &&& 4w14: parse_ipv4_option_1;
            4w8 &&& 4w8: parse_ipv4_option_1;
            default: accept;
        }
    }
    state parse_ipv4_option_1 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w6: parse_l4;
            default: parse_ipv4_option_2;
        }
    }
    state parse_ipv4_option_2 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w7: parse_l4;
            default: parse_ipv4_option_3;
        }
    }
    state parse_ipv4_option_3 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w8: parse_l4;
            default: parse_ipv4_option_4;
        }
    }
    state parse_ipv4_option_4 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w9: parse_l4;
            default: parse_ipv4_option_5;
        }
    }
    state parse_ipv4_option_5 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w10: parse_l4;
            default: parse_ipv4_option_6;
        }
    }
    state parse_ipv4_option_6 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w11: parse_l4;
            default: parse_ipv4_option_7;
        }
    }
    state parse_ipv4_option_7 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w12: parse_l4;
            default: parse_ipv4_option_8;
        }
    }
    state parse_ipv4_option_8 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w13: parse_l4;
            default: parse_ipv4_option_9;
        }
    }
    state parse_ipv4_option_9 {
        pkt.extract(hdr.ipv4_options.next);
        transition select(hdr.ipv4.ihl) {
            4w14: parse_l4;
            default: parse_ipv4_option_10;
        }
    }
    state parse_ipv4_option_10 {
        pkt.extract(hdr.ipv4_options.next);
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
        pkt.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }
}

control NfcIngressDeparser(packet_out pkt,
                           inout headers_t hdr,
                           in local_metadata_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    @name("new_flow_t") Digest<new_flow_t>(DIGEST_TYPE_NEW_FLOW) new_flow_digest;
    apply {
        if (ig_dprsr_md.digest_type == DIGEST_TYPE_NEW_FLOW) {
            new_flow_digest.pack(meta.new_flow);
        }
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.nfc_shim);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_options);
        pkt.emit(hdr.tcp);
        pkt.emit(hdr.udp);
    }
}

/* Egress parses only what it rewrites: Ethernet and the shim (nothing toward the CPU port). */
parser NfcEgressParser(packet_in pkt,
                       out headers_t hdr,
                       out local_metadata_t meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        NFC_INIT_META(meta)
        transition select(eg_intr_md.egress_port) {
            TNA_CPU_PORT: accept;
            default: parse_ethernet;
        }
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_NFC: parse_nfc_shim;
            default: accept;
        }
    }
    state parse_nfc_shim {
        pkt.extract(hdr.nfc_shim);
        transition accept;
    }
}

control NfcEgressDeparser(packet_out pkt,
                          inout headers_t hdr,
                          in local_metadata_t meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.nfc_shim);
    }
}

#endif /* NFC_TNA_PARSER_P4 */
