/* Header unions: extract into one member, isValid on the union and on members, setValid of one
 * member invalidates the others, emit of a union emits its valid member. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header short_t {
    bit<8> kind;
    bit<8> value;
}

header long_t {
    bit<8> kind;
    bit<8> pad;
    bit<32> value;
}

header_union either_t {
    short_t short;
    long_t long;
}

struct headers_t {
    ethernet_t ethernet;
    either_t u;
}

struct metadata_t {
    bit<8> after;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(pkt.lookahead<short_t>().kind) {
            1: parse_short;
            2: parse_long;
            default: accept;
        }
    }
    state parse_short {
        pkt.extract(hdr.u.short);
        transition accept;
    }
    state parse_long {
        pkt.extract(hdr.u.long);
        short_t next = pkt.lookahead<short_t>();
        meta.after = next.kind;
        transition accept;
    }
}

control MyVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (!hdr.u.isValid()) {
            standard_metadata.egress_spec = 2;
        } else if (hdr.u.long.isValid() && meta.after == 0x74) {
            /* the parser peeked at the byte after the long member ("t") */
            standard_metadata.egress_spec = 4;
        } else if (hdr.u.short.isValid() && hdr.u.short.value == 0xFF) {
            /* widen: the long member becomes valid, the short one invalid */
            bit<8> v = hdr.u.short.value;
            hdr.u.long.setValid();
            hdr.u.long.kind = 2;
            hdr.u.long.pad = 0;
            hdr.u.long.value = (bit<32>)v + 1;
            standard_metadata.egress_spec = 3;
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
        pkt.emit(hdr.u);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
