/* Values wider than 64 bits (bit<N>, int<N>, 64 < N <= 128): an IPv6-like header with bit<128>
 * addresses, arithmetic that wraps at N bits, signed int<100>/int<128> (sign extension, arithmetic
 * >>, signed comparisons, saturation), shifts by constants and by fields, slices across bit 64 and
 * slice assignment, concatenation, casts between widths, a select on a wide field, a function with
 * wide parameters, tables with lpm, ternary, range, exact and optional keys on wide fields and wide
 * action data, a register<bit<128>>, a digest with wide members and a hash over a field list with
 * wide fields. The native engine must do exactly what the Python engine does
 * (tests/p4sim/test_differential.py). */
#include <core.p4>
#include <v1model.p4>

const bit<16> ETH_WIDE = 0x88B8;
const int<128> MIN128 = (int<128>)(128w1 << 127);
const bit<128> HIGH_ONE = 128w1 << 127;

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header wide_t {
    bit<8> op;
    bit<128> src;
    bit<128> dst;
    int<128> a;
    int<100> b;
    bit<72> c;
    bit<128> r128;
    int<100> r100;
    bit<64> r64;
    bit<8> r8;
    bit<8> sel;
}

struct headers_t {
    ethernet_t ethernet;
    wide_t w;
}

struct learn_t {
    bit<128> src;
    int<100> b;
    bit<8> op;
    bit<72> c;
}

struct pair_t {
    bit<128> x;
    int<100> y;
}

struct metadata_t {
    pair_t p;
    bit<32> h;
    bit<128> v;
}

bit<128> mix(in bit<128> x, in bit<8> k) {
    return (x << k) ^ (x >> 3) ^ (bit<128>)k;
}

parser MyParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETH_WIDE: wide;
            default: accept;
        }
    }
    state wide {
        pkt.extract(hdr.w);
        transition select(hdr.w.c) {
            72w0 &&& 72w0xFF: low0;
            72w0x800000000000000000 &&& 72w0x800000000000000000: high1;
            default: accept;
        }
    }
    state low0 {
        hdr.w.sel = 1;
        transition accept;
    }
    state high1 {
        hdr.w.sel = 2;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<128>>(16) regs;

    action set_nh(bit<128> nh, bit<9> port) {
        hdr.w.r128 = nh;
        standard_metadata.egress_spec = port;
    }
    action set_val(int<100> v, bit<72> m) {
        hdr.w.r100 = v + hdr.w.b;
        hdr.w.c = hdr.w.c ^ m;
    }
    action nop() { }

    table route {
        key = {
            hdr.w.dst: lpm;
        }
        actions = { set_nh; nop; }
        default_action = set_nh(128w0x20010db8000000000000000000000001, 2);
        size = 64;
    }

    table acl {
        key = {
            hdr.w.src: ternary;
            hdr.w.c: range;
            hdr.w.op: optional;
        }
        actions = { set_val; nop; }
        default_action = set_val(-100s5, 72w0xFF00000000000000FF);
        size = 64;
    }

    table pin {
        key = {
            hdr.w.a: exact;
        }
        actions = { set_val; nop; }
        default_action = nop();
        size = 64;
    }

    apply {
        standard_metadata.egress_spec = 1;
        if (!hdr.w.isValid()) {
            return;
        }
        bit<128> s = hdr.w.src;
        bit<128> d = hdr.w.dst;
        int<128> a = hdr.w.a;
        int<100> b = hdr.w.b;
        bit<8> op = hdr.w.op & 0x0F;
        if (op == 0) {
            hdr.w.r128 = s + d;
            hdr.w.dst = s - d;
            hdr.w.src = s * d;
            hdr.w.a = a * (int<128>)b - MIN128;
            hdr.w.r100 = b + -100s1 - (int<100>)(bit<100>)hdr.w.c;
            hdr.w.r64 = (bit<64>)(s + 1);
        } else if (op == 1) {
            hdr.w.r128 = (s << 7) | (d >> 100);
            hdr.w.src = s << hdr.w.r8;
            hdr.w.dst = d >> hdr.w.r8;
            hdr.w.a = a >> hdr.w.r8;
            hdr.w.r100 = (b >> 65) + (b << 64);
            hdr.w.c = hdr.w.c << (hdr.w.r8 & 0x3F);
            hdr.w.r64 = (bit<64>)(bit<128>)(a >> 64);
        } else if (op == 2) {
            hdr.w.r8 = (s < d ? 8w1 : 8w0) | (s <= d ? 8w2 : 8w0) | (s > d ? 8w4 : 8w0) | (s >= d ? 8w8 : 8w0)
                     | (a < (int<128>)b ? 8w16 : 8w0) | (a >= 0 ? 8w32 : 8w0) | (s == d ? 8w64 : 8w0)
                     | (b < -100s1 ? 8w128 : 8w0);
            hdr.w.r128 = a < MIN128 + 1 ? HIGH_ONE : ~s;
            hdr.w.r100 = -b;
            hdr.w.a = ~a;
        } else if (op == 3) {
            hdr.w.r64 = s[95:32];
            hdr.w.r8 = d[67:60];
            hdr.w.r128 = s[63:0] ++ d[127:64];
            hdr.w.c = hdr.w.r8 ++ s[127:64];
            hdr.w.src[100:30] = d[70:0];
            hdr.w.dst[127:64] = 64w0;
            hdr.w.a[70:60] = 11w0x7FF;
            hdr.w.r100 = (int<100>)(hdr.w.r8 ++ b[91:0]);
        } else if (op == 4) {
            hdr.w.r128 = (bit<128>)(int<128>)b;
            hdr.w.a = (int<128>)b;
            hdr.w.r100 = (int<100>)a;
            hdr.w.r64 = (bit<64>)(bit<100>)b;
            hdr.w.r8 = (bit<8>)(bit<128>)(a >> 120);
            hdr.w.src = (bit<128>)(int<128>)(int<8>)hdr.w.r8;
            hdr.w.dst = (bit<128>)(bit<72>)(bit<128>)a;
            hdr.w.c = (bit<72>)(int<72>)(int<16>)hdr.w.c[15:0];
        } else if (op == 5) {
            route.apply();
            acl.apply();
            pin.apply();
        } else if (op == 6) {
            bit<32> i = (bit<32>)hdr.w.r8[3:0];
            bit<128> old;
            regs.read(old, i);
            regs.write(i, old + s);
            hdr.w.r128 = old;
        } else if (op == 7) {
            learn_t l = {s, b, hdr.w.op, hdr.w.c};
            digest<learn_t>(1, l);
            hash(meta.h, HashAlgorithm.crc32, 32w0, {hdr.w.src, hdr.w.b, hdr.w.op, hdr.w.c, hdr.w.a}, 32w0);
            hdr.w.r64 = (bit<64>)meta.h;
            hash(hdr.w.r8, HashAlgorithm.crc16, 8w0, {hdr.w.dst}, 8w251);
        } else if (op == 8) {
            hdr.w.r128 = s |+| d;
            hdr.w.src = s |-| d;
            hdr.w.a = a |+| (int<128>)b;
            hdr.w.r100 = b |-| (int<100>)(bit<100>)hdr.w.c;
        } else if (op == 9) {
            meta.p.x = mix(s, hdr.w.r8);
            meta.p.y = b;
            pair_t q = meta.p;
            q.y = q.y + 1;
            hdr.w.r128 = q.x;
            hdr.w.r100 = q.y;
            hdr.w.r8 = (q.x == meta.p.x ? 8w1 : 8w0) + (q.y != meta.p.y ? 8w2 : 8w0);
            meta.v = hdr.w.sel == 0 ? s : d;
            hdr.w.dst = meta.v & (s ^ d);
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
        pkt.emit(hdr.w);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
