/* Signed values (int<N>): two's complement arithmetic that wraps, saturating |+| and |-|, signed
 * comparisons, arithmetic >>, <<, casts between int<N>, bit<N> and int<M> (sign extension,
 * truncation), slices and slice assignment, concatenation, signed header fields of odd widths,
 * a signed select key with ranges and masks, lookahead of a signed value, a table with a signed key
 * and signed action data, a function, a switch, a digest and a hash of signed fields. The native
 * engine must do exactly what the Python engine does (tests/p4sim/test_differential.py). */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETH_SIGNED = 0x88B7;
const int<8> MINUS_ONE = -1;
const int<8> MIN8 = -128;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* operands a..g, results r* */
header sgn_t {
    bit<8> op;
    int<8> a;
    int<8> b;
    int<16> c;
    int<32> d;
    int<64> e;
    int<4> f;
    bit<4> g;
    int<8> r8;
    int<16> r16;
    int<32> r32;
    int<64> r64;
    int<3> r3;
    bit<5> r5;
    bit<8> sel;
}

struct headers_t {
    ethernet_t ethernet;
    sgn_t s;
}

struct learn_t {
    int<8> a;
    int<16> c;
    bit<8> op;
}

struct metadata_t {
    int<16> m16;
    int<8> peeked;
    bit<16> h;
}

int<16> clamp16(in int<16> x, in int<16> lo, in int<16> hi) {
    if (x < lo) {
        return lo;
    }
    if (x > hi) {
        return hi;
    }
    return x;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETH_SIGNED: peek;
            default: accept;
        }
    }
    state peek {
        meta.peeked = pkt.lookahead<int<8>>();
        meta.m16 = pkt.lookahead<int<16>>();
        pkt.extract(hdr.s);
        transition select(hdr.s.a) {
            -128 .. -65: accept;
            -64 .. -1: neg;
            0 &&& 0x70: small;
            default: accept;
        }
    }
    state neg {
        hdr.s.sel = 1;
        transition select(hdr.s.f) {
            -8 .. -5: deep;
            default: accept;
        }
    }
    state deep {
        hdr.s.sel = 3;
        transition accept;
    }
    state small {
        hdr.s.sel = 2;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set_r(int<16> v, int<8> w) {
        hdr.s.r16 = v;
        hdr.s.r8 = w - hdr.s.a;
        hdr.s.r32 = (int<32>)v * (int<32>)w;
    }
    action scale(int<8> k) {
        hdr.s.r8 = hdr.s.a * k;
        hdr.s.r3 = (int<3>)k;
    }
    action nop() { }

    table by_signed {
        key = {
            hdr.s.b: exact;
            hdr.s.f: ternary;
        }
        actions = { set_r; scale; nop; }
        default_action = scale(-3);
        size = 64;
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (!hdr.s.isValid()) {
            return;
        }
        int<8> a = hdr.s.a;
        int<8> b = hdr.s.b;
        int<16> c = hdr.s.c;
        int<32> d = hdr.s.d;
        int<64> e = hdr.s.e;
        bit<8> op = hdr.s.op & 0x0F;
        if (op == 0) {
            hdr.s.r8 = a + b;
            hdr.s.r16 = c - (int<16>)a;
            hdr.s.r32 = d * (int<32>)b;
            hdr.s.r64 = e + (int<64>)d;
            hdr.s.r3 = hdr.s.f[2:0] == 0 ? -3s4 : (int<3>)hdr.s.f;
        } else if (op == 1) {
            hdr.s.r8 = a |+| b;
            hdr.s.r16 = c |-| (int<16>)b;
            hdr.s.r32 = d |+| d;
            hdr.s.r64 = e |-| (int<64>)c;
            hdr.s.r3 = (int<3>)hdr.s.f |+| 3s2;
        } else if (op == 2) {
            hdr.s.r8 = (a < b ? 8s1 : 8s0) | (a <= b ? 8s2 : 8s0) | (a > b ? 8s4 : 8s0) | (a >= b ? 8s8 : 8s0);
            hdr.s.r16 = c < 0 ? -c : c;
            hdr.s.r32 = d > -32s1000 && d < 32s1000 ? 32s1 : -32s1;
            hdr.s.r64 = e < (int<64>)d ? -64s1 : 64s1;
            hdr.s.r5 = (bit<5>)(bit<4>)hdr.s.f;
        } else if (op == 3) {
            hdr.s.r8 = a >> 2;
            hdr.s.r16 = c >> hdr.s.g;
            hdr.s.r32 = d << hdr.s.g;
            hdr.s.r64 = (e >> 40) ^ (e << 3);
            hdr.s.r3 = (int<3>)(hdr.s.f >> 1);
            hdr.s.sel = (bit<8>)(a >> hdr.s.op[7:4]);
        } else if (op == 4) {
            hdr.s.r16 = (int<16>)a;
            hdr.s.r32 = (int<32>)(bit<32>)(bit<8>)a;
            hdr.s.r64 = (int<64>)c;
            hdr.s.r8 = (int<8>)c;
            hdr.s.r5 = (bit<5>)(bit<8>)a;
            hdr.s.r3 = (int<3>)(bit<3>)hdr.s.g;
        } else if (op == 5) {
            hdr.s.r16 = a ++ b;
            hdr.s.r32 = (int<32>)(bit<32>)(hdr.s.g ++ hdr.s.f ++ a ++ b);
            hdr.s.r8 = (int<8>)c[11:4];
            hdr.s.r64 = e;
            hdr.s.r64[63:56] = (bit<8>)a;
            hdr.s.r64[3:0] = hdr.s.g;
            hdr.s.c[15:12] = 4w0x8;
        } else if (op == 6) {
            hdr.s.r8 = -a;
            hdr.s.r16 = ~c;
            hdr.s.r32 = -d + (int<32>)(~b);
            hdr.s.r64 = -e;
            hdr.s.r3 = -(int<3>)hdr.s.f;
            hdr.s.f = -hdr.s.f;
        } else if (op == 7) {
            hdr.s.r16 = clamp16(c, -16s100, 16s100) + meta.m16;
            meta.m16 = clamp16((int<16>)a * 16s300, (int<16>)b, 16s30000);
            hdr.s.r32 = (int<32>)meta.m16;
            hdr.s.r8 = meta.peeked;
        } else if (op == 8) {
            by_signed.apply();
        } else if (op == 9) {
            switch (a) {
                MINUS_ONE: { hdr.s.r8 = 10; }
                MIN8: { hdr.s.r8 = 20; }
                0:
                1: { hdr.s.r8 = 30; }
                default: { hdr.s.r8 = -40; }
            }
            hdr.s.r16 = (int<16>)(a & b) | (int<16>)(a ^ b);
        } else if (op == 10) {
            learn_t l = {a, c, hdr.s.op};
            digest<learn_t>(1, l);
            hash(meta.h, HashAlgorithm.crc16, 16w0, {hdr.s.a, hdr.s.c, hdr.s.f, hdr.s.e}, 16w0);
            hdr.s.r16 = (int<16>)meta.h;
            hdr.s.r32 = (int<32>)(d == -32s1 ? 32w7 : 32w9);
        } else if (op == 11) {
            hdr.s.r8 = (int<8>)(a * b) >> 1;
            hdr.s.r16 = (int<16>)a * (int<16>)b;
            hdr.s.r32 = (int<32>)c * (int<32>)c - d;
            hdr.s.r64 = e * (int<64>)d;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.s);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
