/* Tables: exact with a direct counter, ternary with priorities, range, optional, const entries,
 * hit/miss, switch on action_run, default actions. */
#include "include/base.p4"

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) exact_hits;

    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_r8(bit<8> v) {
        hdr.test.r8 = v;
    }
    action set_r16(bit<16> v) {
        hdr.test.r16 = v;
    }
    action mark_miss() {
        hdr.test.r16 = 0xEEEE;
    }

    /* exact on test.a -> egress port; counted */
    table t_exact {
        key = { hdr.test.a: exact; }
        actions = { set_port; @defaultonly drop; }
        default_action = drop();
        counters = exact_hits;
        size = 16;
    }

    table t_ternary {
        key = { hdr.test.b: ternary @name("b"); }
        actions = { set_r8; NoAction; }
        default_action = NoAction();
    }

    table t_range {
        key = { hdr.test.b: range @name("b_range"); }
        actions = { set_r16; @defaultonly mark_miss; }
        const default_action = mark_miss();
    }

    table t_optional {
        key = {
            hdr.test.op: optional @name("op");
            hdr.test.a: exact @name("a");
        }
        actions = { set_r8; NoAction; }
        default_action = set_r8(0x77);
    }

    table t_const {
        key = { hdr.test.a: ternary @name("a"); }
        actions = { set_r16; NoAction; }
        const entries = {
            0x10 &&& 0xF0 : set_r16(0x1010);
            0x01 : set_r16(0x0101);
            _ : set_r16(0xFFFF);
        }
    }

    apply {
        if (!hdr.test.isValid()) {
            drop();
            exit;
        }
        if (t_exact.apply().hit) {
            hdr.test.r32 = 1;
        } else {
            hdr.test.r32 = 2;
        }
        switch (t_ternary.apply().action_run) {
            set_r8: {
                hdr.test.r32 = hdr.test.r32 | 0x100;
            }
            default: {
                hdr.test.r32 = hdr.test.r32 | 0x200;
            }
        }
        if (hdr.test.op == 0xAA) {
            t_optional.apply();
        } else if (hdr.test.op == 0xBB) {
            t_const.apply();
        } else {
            t_range.apply();
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

BASE_MAIN
