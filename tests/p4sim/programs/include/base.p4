/* Shared headers, parser and deparser of the p4sim conformance programs. A program includes this
 * file, defines MyIngress and MyEgress, and instantiates BASE_MAIN. */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETH_IPV4 = 0x0800;
const bit<16> ETH_VLAN = 0x8100;
const bit<16> ETH_TEST = 0x88B6;
const bit<8> PROTO_TCP = 6;
const bit<8> PROTO_UDP = 17;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_t {
    bit<3> pcp;
    bit<1> dei;
    bit<12> vid;
    bit<16> ether_type;
}

/* A scratch header the expression tests write their results into. */
header test_t {
    bit<8> op;
    bit<8> a;
    bit<8> b;
    bit<8> r8;
    bit<16> r16;
    bit<32> r32;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4> data_offset;
    bit<4> res;
    bit<8> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t ethernet;
    vlan_t[2] vlan;
    test_t test;
    ipv4_t ipv4;
    tcp_t tcp;
    udp_t udp;
}

struct metadata_t {
    bit<16> l4_src;
    bit<16> l4_dst;
    @field_list(1)
    bit<8> pass;
    bit<32> scratch;
}

parser BaseParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETH_VLAN: parse_vlan;
            ETH_IPV4: parse_ipv4;
            ETH_TEST: parse_test;
            default: accept;
        }
    }
    state parse_vlan {
        pkt.extract(hdr.vlan.next);
        transition select(hdr.vlan.last.ether_type) {
            ETH_VLAN: parse_vlan;
            ETH_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_test {
        pkt.extract(hdr.test);
        transition accept;
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            PROTO_TCP: parse_tcp;
            PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_tcp {
        pkt.extract(hdr.tcp);
        meta.l4_src = hdr.tcp.src_port;
        meta.l4_dst = hdr.tcp.dst_port;
        transition accept;
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src = hdr.udp.src_port;
        meta.l4_dst = hdr.udp.dst_port;
        transition accept;
    }
}

control BaseVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control BaseCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control BaseDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

#define BASE_MAIN V1Switch(BaseParser(), BaseVerify(), MyIngress(), MyEgress(), BaseCompute(), BaseDeparser()) main;
