/* Action profiles and action selectors: members, groups, selector hashing on a key field. */
#include "include/base.p4"

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action_profile(32) shared_members;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action set_port_mark(bit<9> port, bit<16> mark) {
        standard_metadata.egress_spec = port;
        hdr.test.r16 = mark;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }

    table by_a {
        key = { hdr.test.a: exact @name("a"); }
        actions = { set_port; set_port_mark; drop; }
        const default_action = drop();
        implementation = shared_members;
    }

    table ecmp {
        key = {
            hdr.test.op: exact @name("op");
            hdr.test.b: selector @name("b");
        }
        actions = { set_port; drop; }
        default_action = drop();
        implementation = action_selector(HashAlgorithm.crc16, 32w64, 32w14);
    }

    apply {
        if (hdr.test.op == 0) {
            by_a.apply();
        } else {
            ecmp.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

BASE_MAIN
