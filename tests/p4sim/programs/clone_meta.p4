/* What an I2E and an E2E clone see of the metadata, as BMv2's simple_switch gives it: every
 * metadata field (user and standard) reset but for the @field_list fields of
 * clone_preserving_field_list; egress starts with egress_spec = drop port + 1 and packet_length
 * = the length of the packet ingress received. Egress reports what it sees into the probe header. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

/* op: 1 I2E clone, 2 I2E clone preserving field list 1, 3 E2E clone, 4 E2E clone preserving
 * field list 1, 5 ingress writes packet_length; the rest is written by egress */
header probe_t {
    bit<8> op;
    bit<8> session;
    bit<16> ingress_port;
    bit<16> egress_spec;
    bit<16> packet_length;
    bit<8> instance_type;
    bit<8> pass;
    bit<16> from_parser;
    bit<16> from_ingress;
    bit<16> from_egress;
}

struct headers_t {
    ethernet_t ethernet;
    probe_t probe;
}

struct metadata_t {
    bit<16> from_parser;
    bit<16> from_ingress;
    bit<16> from_egress;
    @field_list(1)
    bit<8> pass;
}

parser ProbeParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    state start {
        pkt.extract(hdr.ethernet);
        meta.from_parser = 0xAAAA;
        /* the probe is parsed on port 1 only: an I2E clone is parsed again with its ingress_port */
        transition select(hdr.ethernet.ether_type, standard_metadata.ingress_port) {
            (0x88B6, 9w1): parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
        transition accept;
    }
}

control ProbeVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ProbeIngress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t standard_metadata) {
    apply {
        if (!hdr.probe.isValid()) {
            mark_to_drop(standard_metadata);
            exit;
        }
        standard_metadata.egress_spec = 2;
        meta.from_ingress = 0x1111;
        meta.pass = 0x11;
        if (hdr.probe.op == 1) {
            clone(CloneType.I2E, (bit<32>)hdr.probe.session);
        } else if (hdr.probe.op == 2) {
            clone_preserving_field_list(CloneType.I2E, (bit<32>)hdr.probe.session, 1);
        } else if (hdr.probe.op == 5) {
            standard_metadata.packet_length = 7;
        }
    }
}

control ProbeEgress(inout headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    apply {
        hdr.probe.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.probe.egress_spec = (bit<16>)standard_metadata.egress_spec;
        hdr.probe.packet_length = (bit<16>)standard_metadata.packet_length;
        hdr.probe.instance_type = (bit<8>)standard_metadata.instance_type;
        hdr.probe.pass = meta.pass;
        hdr.probe.from_parser = meta.from_parser;
        hdr.probe.from_ingress = meta.from_ingress;
        hdr.probe.from_egress = meta.from_egress;
        if (standard_metadata.instance_type == 0) {
            meta.from_egress = 0x3333;
            meta.pass = 0x77;
            if (hdr.probe.op == 3) {
                clone(CloneType.E2E, (bit<32>)hdr.probe.session);
            } else if (hdr.probe.op == 4) {
                clone_preserving_field_list(CloneType.E2E, (bit<32>)hdr.probe.session, 1);
            }
        }
    }
}

control ProbeCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ProbeDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(ProbeParser(), ProbeVerify(), ProbeIngress(), ProbeEgress(), ProbeCompute(), ProbeDeparser()) main;
