/* Parser features: lookahead, select on tuples with masks, ranges, don't-care and default,
 * verify() with a program error, explicit reject, header stacks (.next/.last), advance. The
 * ingress reports what the parser saw in the scratch header or the Ethernet source address. */
#include <core.p4>
#include <v1model.p4>

error {
    BadOp
}

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header mpls_t {
    bit<20> label;
    bit<3> tc;
    bit<1> bos;
    bit<8> ttl;
}

header test_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> r8;
    bit<16> r16;
    bit<32> r32;
}

struct headers_t {
    ethernet_t ethernet;
    mpls_t[3] mpls;
    test_t test;
}

struct metadata_t {
    bit<8> path;
    bit<16> peek;
}

/* A sub-parser: the MPLS label stack. */
parser MplsParser(packet_in pkt, inout mpls_t[3] mpls) {
    state start {
        pkt.extract(mpls.next);
        transition select(mpls.last.bos) {
            0: start;
            1: accept;
        }
    }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    MplsParser() mpls_parser;

    state start {
        meta.peek = pkt.lookahead<bit<16>>();
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type, hdr.ethernet.src_addr[7:0]) {
            (0x8847, _): parse_mpls;
            (0x88B6, 0x01 &&& 0x0F): masked;
            (0x88B6, 0x20 .. 0x2F): ranged;
            (0x88B6, default): parse_test;
            (0x88B7, 0xFF): skip_two;
            default: accept;
        }
    }
    state masked {
        meta.path = 1;
        transition parse_test;
    }
    state ranged {
        meta.path = 2;
        transition parse_test;
    }
    state skip_two {
        pkt.advance(16);
        meta.path = 3;
        transition parse_test;
    }
    state parse_mpls {
        mpls_parser.apply(pkt, hdr.mpls);
        transition accept;
    }
    state parse_test {
        pkt.extract(hdr.test);
        verify(hdr.test.op != 0xEE, error.BadOp);
        transition select(hdr.test.op) {
            0xFF: reject;
            0x00 .. 0x0F: accept;
            0xF0 &&& 0xF0: accept;
        }
    }
}

control MyVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (standard_metadata.parser_error == error.PacketTooShort) {
            standard_metadata.egress_spec = 2;
        } else if (standard_metadata.parser_error == error.BadOp) {
            standard_metadata.egress_spec = 3;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            standard_metadata.egress_spec = 4;
        } else if (standard_metadata.parser_error != error.NoError) {
            standard_metadata.egress_spec = 5;
        }
        if (hdr.test.isValid()) {
            hdr.test.r8 = meta.path;
            hdr.test.r16 = meta.peek;
        }
        if (hdr.mpls[0].isValid()) {
            hdr.ethernet.src_addr = 0;
            if (hdr.mpls[2].isValid()) {
                hdr.ethernet.src_addr = 3;
            } else if (hdr.mpls[1].isValid()) {
                hdr.ethernet.src_addr = 2;
            } else {
                hdr.ethernet.src_addr = 1;
            }
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.mpls);
        pkt.emit(hdr.test);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
