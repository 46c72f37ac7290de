/* v1model externs: register read/write, indexed counter, meter, digest, hash (crc16, crc32, csum16,
 * identity), random, and ipv4 checksum verify/update. */
#include "include/base.p4"

struct learn_t {
    bit<8> op;
    bit<8> a;
    bit<16> l4_dst;
}

control MyVerify(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        verify_checksum_with_payload(hdr.udp.isValid() && hdr.udp.checksum != 0,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control MyCompute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum_with_payload(hdr.udp.isValid() && hdr.udp.checksum != 0,
            { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length },
            hdr.udp.checksum, HashAlgorithm.csum16);
        /* csum16 of lists no header validity decides (casts, metadata, constants): 15 bits, and
         * 19 bits (an odd number of bytes), padded at the end */
        update_checksum(hdr.test.isValid() && hdr.test.op == 12,
            { (bit<4>)hdr.test.a, meta.pass, 3w5 }, hdr.test.r16, HashAlgorithm.csum16);
        update_checksum(hdr.test.isValid() && hdr.test.op == 13,
            { (bit<4>)hdr.test.a, (bit<12>)meta.pass, 3w5 }, hdr.test.r16, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(16) totals;
    counter(8, CounterType.packets) op_packets;
    meter(4, MeterType.packets) op_meter;
    meter(2, MeterType.bytes) byte_meter;
    learn_t learn;

    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            if (standard_metadata.checksum_error == 1) {
                standard_metadata.egress_spec = 9;
            }
            exit;
        }
        if (!hdr.test.isValid()) {
            exit;
        }
        op_packets.count((bit<32>)hdr.test.op);
        bit<32> idx = (bit<32>)hdr.test.a;
        if (hdr.test.op == 1) {
            bit<32> cur;
            @atomic {
                totals.read(cur, idx);
                cur = cur + (bit<32>)hdr.test.b;
                totals.write(idx, cur);
            }
            hdr.test.r32 = cur;
        } else if (hdr.test.op == 2) {
            learn.op = hdr.test.op;
            learn.a = hdr.test.a;
            learn.l4_dst = 0xBEEF;
            digest<learn_t>(1, learn);
        } else if (hdr.test.op == 3) {
            hash(hdr.test.r16, HashAlgorithm.crc16, 16w0, { hdr.test.a, hdr.test.b }, 17w65536);
            hash(hdr.test.r32, HashAlgorithm.crc32, 32w0, { hdr.test.a, hdr.test.b }, 33w0x100000000);
        } else if (hdr.test.op == 4) {
            hash(hdr.test.r16, HashAlgorithm.csum16, 16w0, { hdr.test.a, hdr.test.b }, 32w0);
            hash(hdr.test.r32, HashAlgorithm.identity, 32w100, { hdr.test.a, hdr.test.b }, 32w1000);
        } else if (hdr.test.op == 5) {
            random(hdr.test.r8, 8w10, 8w20);
        } else if (hdr.test.op == 7) {
            /* 19 bits: BMv2 packs them bit by bit and pads at the end */
            hash(hdr.test.r16, HashAlgorithm.crc16, 16w0,
                 { (bit<4>)hdr.test.a, (bit<12>)hdr.test.b, 3w5 }, 32w0);
            hash(hdr.test.r32, HashAlgorithm.crc32, 32w0,
                 { (bit<4>)hdr.test.a, (bit<12>)hdr.test.b, 3w5 }, 33w0x100000000);
        } else if (hdr.test.op == 8) {
            /* hdr.ipv4 is not valid in a test packet: its field and its whole header are left out */
            hash(hdr.test.r16, HashAlgorithm.crc16, 16w0, { hdr.test.a, hdr.ipv4.ttl, hdr.test.b }, 32w0);
            hash(hdr.test.r32, HashAlgorithm.crc32, 32w0, { hdr.test.a, hdr.ipv4, hdr.test.b }, 33w0x100000000);
        } else if (hdr.test.op == 9) {
            /* identity: the first 8 bytes of the 11 */
            bit<64> wide;
            hash(wide, HashAlgorithm.identity, 64w0,
                 { hdr.test.a, hdr.test.b, hdr.test.op, 32w0x11223344, 32w0x55667788 }, 65w0);
            hdr.test.r32 = wide[31:0];
            hdr.test.r16 = wide[63:48];
        } else if (hdr.test.op == 10) {
            /* csum16 over 12 bits of a valid header and a field of an invalid one */
            hash(hdr.test.r16, HashAlgorithm.csum16, 16w0, { hdr.test.a, hdr.ipv4.ttl, (bit<4>)hdr.test.b }, 32w0);
        } else if (hdr.test.op == 11) {
            /* the lists of op 8 with hdr.ipv4 valid: every field is in */
            hdr.ipv4.setValid();
            hdr.ipv4.version = 4;
            hdr.ipv4.ihl = 5;
            hdr.ipv4.diffserv = 0;
            hdr.ipv4.total_len = 20;
            hdr.ipv4.identification = 0x1234;
            hdr.ipv4.flags = 2;
            hdr.ipv4.frag_offset = 0;
            hdr.ipv4.ttl = 0x40;
            hdr.ipv4.protocol = 17;
            hdr.ipv4.hdr_checksum = 0;
            hdr.ipv4.src_addr = 0x0A000001;
            hdr.ipv4.dst_addr = 0x0A000002;
            hash(hdr.test.r16, HashAlgorithm.crc16, 16w0, { hdr.test.a, hdr.ipv4.ttl, hdr.test.b }, 32w0);
            hash(hdr.test.r32, HashAlgorithm.crc32, 32w0, { hdr.test.a, hdr.ipv4, hdr.test.b }, 33w0x100000000);
            hdr.ipv4.setInvalid();
        } else if (hdr.test.op == 14) {
            /* header stack elements that are not valid in a test packet: left out as well */
            hash(hdr.test.r16, HashAlgorithm.crc16, 16w0, { hdr.test.a, hdr.vlan[0].vid, hdr.test.b }, 32w0);
            hash(hdr.test.r32, HashAlgorithm.crc32, 32w0, { hdr.test.a, hdr.vlan[1], hdr.test.b }, 33w0x100000000);
        } else if (hdr.test.op == 12 || hdr.test.op == 13) {
            meta.pass = hdr.test.b;  /* for the update_checksum of MyCompute */
        } else if (hdr.test.op == 6) {
            op_meter.execute_meter((bit<32>)hdr.test.a, hdr.test.r8);
            bit<32> colour;
            byte_meter.execute_meter((bit<32>)hdr.test.b, colour);
            hdr.test.r32 = colour;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

V1Switch(BaseParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), BaseDeparser()) main;
