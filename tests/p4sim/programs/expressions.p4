/* Expressions and statements: arithmetic (wrap-around and saturating), shifts, slices, concatenation,
 * casts, signed values, booleans, local variables, actions with directional parameters, return,
 * exit, sub-controls, enums, header validity and header stacks. Results go into hdr.test.r*. */
#include "include/base.p4"

enum bit<8> Color {
    RED = 1,
    GREEN = 2
}

enum Mode {
    FAST,
    SLOW
}

typedef bit<8> byte_t;
const bit<8> KEY = 0x42;
type bit<8> opaque_t;

bit<8> max8(in bit<8> x, in bit<8> y) {
    if (x > y) {
        return x;
    }
    return y;
}

void swap8(inout bit<8> x, inout bit<8> y) {
    bit<8> tmp = x;
    x = y;
    y = tmp;
}

control Adder(inout test_t t)(bit<8> k, bool twice) {
    apply {
        t.r8 = t.r8 + k;
        if (twice) {
            t.r8 = t.r8 + k;
        }
    }
}

control Doubler(inout test_t t, in bit<8> factor) {
    action times(bit<8> k) {
        t.r8 = t.a * k;
    }
    apply {
        times(factor);
        if (t.r8 == 0) {
            return;
        }
        t.r16 = 0x0D0D;
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    Doubler() doubler;
    Adder(8w5, true) add_ten;
    Adder(3, false) add_three;

    action incr(inout bit<8> x, bit<8> by) {
        x = x + by;
    }
    action leave() {
        hdr.test.r16 = 0xE1E1;
        exit;
    }

    apply {
        standard_metadata.egress_spec = 1;
        byte_t a = hdr.test.a;
        bit<8> b = hdr.test.b;
        bit<8> op = hdr.test.op;
        if (op == 1) {
            hdr.test.r8 = a + b;
            hdr.test.r16 = (bit<16>)a * 3;
            hdr.test.r32 = (bit<32>)(a - b);
        } else if (op == 2) {
            hdr.test.r8 = a |+| b;
            hdr.test.r16 = (bit<16>)(a |-| b);
            hdr.test.r32 = (a / 3) ++ 8w0 ++ (bit<16>)(b % 5);
        } else if (op == 3) {
            hdr.test.r8 = a << 3;
            hdr.test.r16 = ((bit<16>)a) << b[3:0];
            hdr.test.r32 = (bit<32>)(a >> 2) ^ 32w0xF0000000;
        } else if (op == 4) {
            hdr.test.r16 = a ++ b;
            hdr.test.r8 = (a ++ b)[11:4];
            hdr.test.r32[7:0] = b;
            hdr.test.r32[31:24] = a;
            hdr.test.r32[15:12] = 4w0xF;
        } else if (op == 5) {
            int<8> sa = (int<8>)a;
            int<8> sb = (int<8>)b;
            hdr.test.r8 = (bit<8>)(sa + sb);
            hdr.test.r16 = (bit<16>)((int<16>)sa);
            hdr.test.r32 = sa < sb ? 32w1 : 32w0;
            int<8> sat = sa |+| sb;
            hdr.test.b = (bit<8>)sat;
            hdr.test.a = (bit<8>)(sa >> 1);
        } else if (op == 6) {
            bool both = a > b && b != 0;
            bool either = a == 0 || !(b <= 3);
            hdr.test.r8 = ((bit<1>)both ++ 7w0) | (bit<8>)(bit<1>)either;
            hdr.test.r16 = (bit<16>)(~a);
            hdr.test.r32 = (bit<32>)(-a);
        } else if (op == 7) {
            incr(hdr.test.r8, 5);
            incr(hdr.test.r8, b);
            hdr.test.r16 = 1;
        } else if (op == 8) {
            doubler.apply(hdr.test, b);
        } else if (op == 9) {
            leave();
            hdr.test.r16 = 0xBAD0;
        } else if (op == 10) {
            Color c = (Color)a;
            Mode m = Mode.SLOW;
            if (c == Color.GREEN && m == Mode.SLOW) {
                hdr.test.r8 = (bit<8>)Color.GREEN;
            }
            opaque_t o = (opaque_t)b;
            hdr.test.r16 = (bit<16>)(bit<8>)o;
        } else if (op == 11) {
            hdr.vlan.push_front(1);
            hdr.vlan[0].setValid();
            hdr.vlan[0].vid = 12w0xABC;
            hdr.vlan[0].ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETH_VLAN;
        } else if (op == 12) {
            hdr.test.setInvalid();
            hdr.ethernet.ether_type = 0x0800;
        } else if (op == 14) {
            switch (a) {
                1: { hdr.test.r8 = 10; }
                2:
                3: { hdr.test.r8 = 23; }
                KEY: { hdr.test.r8 = 99; }
                default: { hdr.test.r8 = 0xDD; }
            }
            switch (Color.GREEN) {
                Color.RED: { hdr.test.r16 = 1; }
                Color.GREEN: { hdr.test.r16 = 2; }
            }
        } else if (op == 15) {
            bit<32> i = (bit<32>)(a & 1);
            hdr.vlan[i].setValid();
            hdr.vlan[i].vid = 12w7;
            hdr.vlan[b].vid = 12w9;
            hdr.test.r8 = hdr.vlan[i].isValid() ? 8w1 : 8w0;
            hdr.test.r16 = (bit<16>)hdr.vlan[i].vid;
            hdr.test.r32 = (bit<32>)hdr.vlan[b].vid;
            hdr.vlan[i].setInvalid();
        } else if (op == 16) {
            hdr.test.r8 = max8(a, b) |+| max8(b, 1);
            swap8(hdr.test.a, hdr.test.b);
        } else if (op == 17) {
            add_ten.apply(hdr.test);
            add_three.apply(hdr.test);
        } else if (op == 13) {
            test_t copy = hdr.test;
            copy.r8 = 0x42;
            hdr.test = copy;
            hdr.test.r16 = copy.isValid() ? 16w1 : 16w0;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.vlan[1].isValid()) {
            hdr.vlan.pop_front(1);
        }
    }
}

BASE_MAIN
