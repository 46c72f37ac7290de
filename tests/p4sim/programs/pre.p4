/* The packet replication engine: multicast with replication ids, I2E and E2E clones, resubmit and
 * recirculate with a preserved field list, drop in egress, truncate. */
#include "include/base.p4"

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.test.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.test.r8 = hdr.test.r8 + 1;
        if (hdr.test.op == 1) {
            standard_metadata.mcast_grp = (bit<16>)hdr.test.a;
        } else if (hdr.test.op == 2) {
            standard_metadata.egress_spec = 2;
            clone(CloneType.I2E, (bit<32>)hdr.test.a);
        } else if (hdr.test.op == 3) {
            standard_metadata.egress_spec = 2;
        } else if (hdr.test.op == 4) {
            if (standard_metadata.instance_type == 0) {
                meta.pass = 0x5A;
                resubmit_preserving_field_list(1);
            } else {
                standard_metadata.egress_spec = 3;
                hdr.test.b = meta.pass;
            }
        } else if (hdr.test.op == 5) {
            if (standard_metadata.instance_type == 4) {
                standard_metadata.egress_spec = 6;
                hdr.test.b = meta.pass;
            } else {
                standard_metadata.egress_spec = 4;
            }
        } else if (hdr.test.op == 6) {
            standard_metadata.egress_spec = 1;
            truncate(16);
        } else if (hdr.test.op == 7) {
            standard_metadata.egress_spec = 2;
            meta.pass = 0x11;
            meta.l4_src = 0x2222;
        } else {
            standard_metadata.egress_spec = 1;
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.test.r16 = standard_metadata.egress_rid;
        hdr.test.r32 = standard_metadata.instance_type;
        if (hdr.test.op == 1 && standard_metadata.egress_rid == 3) {
            mark_to_drop(standard_metadata);
        }
        if (hdr.test.op == 3 && standard_metadata.instance_type == 0) {
            clone(CloneType.E2E, (bit<32>)hdr.test.a);
        }
        if (hdr.test.op == 7) {
            if (standard_metadata.instance_type == 0) {
                /* BMv2 starts egress with egress_spec = drop port + 1, 0 in 9 bits */
                hdr.test.b = (bit<8>)standard_metadata.egress_spec;
                meta.pass = 0x77;
                clone_preserving_field_list(CloneType.E2E, (bit<32>)hdr.test.a, 1);
            } else {
                /* the clone: user metadata reset but for the @field_list(1) field */
                hdr.test.b = meta.pass;
                hdr.test.r16 = meta.l4_src;
                hdr.test.r8 = (bit<8>)standard_metadata.egress_spec;
            }
        }
        if (hdr.test.op == 5 && standard_metadata.instance_type == 0) {
            meta.pass = 0x33;
            recirculate_preserving_field_list(1);
        }
    }
}

BASE_MAIN
