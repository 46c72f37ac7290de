/*
 * nfcluster switch program for Tofino (TNA).  Not compiled here (no Tofino SDE on this
 * machine); `make build` type-checks it (p4sim check --arch tna, docs/tofino.md); see
 * p4src/tna/README.md.  Same table/action/extern names as p4src/v1model/.
 */
#include <core.p4>
#include <tna.p4>

#ifndef TNA_CPU_PORT
#define TNA_CPU_PORT 192
#endif
const DigestType_t DIGEST_TYPE_NEW_FLOW = 1;

#include "define.p4"
#include "size.p4"
#include "header.p4"
#include "checksum.p4"

#include "include/parser.p4"
#include "include/control/port_counters.p4"
#include "include/control/port_role.p4"
#include "include/control/packetio.p4"
#include "include/control/handoff.p4"
#include "include/control/output.p4"
#include "include/control/chain.p4"
#include "include/control/slot.p4"
#include "include/control/stamping.p4"
#include "include/control/replication.p4"
#include "include/control/forwarding.p4"

control NfcIngress(inout headers_t hdr,
                   inout local_metadata_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    PortRxCounter() port_rx_counter;
    PortClassifier() port_classifier;
    PacketIoIngress() packetio;
    HandOff() handoff;
    NfOutputAcceptance() output;
    ChainSteering() chain;
    EdgeForwarding() forwarding;
    SlotMap() slot_map;
    Stamping() stamping;
    ReplicationIngress() replication;

    apply {
        port_rx_counter.apply(ig_intr_md);
        port_classifier.apply(hdr, meta, ig_intr_md, ig_dprsr_md);
        packetio.apply(hdr, meta, ig_intr_md, ig_tm_md, ig_dprsr_md);
        handoff.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
        output.apply(hdr, meta, ig_intr_md, ig_dprsr_md);
        chain.apply(hdr, meta, ig_intr_md);
        forwarding.apply(hdr, meta, ig_intr_md, ig_dprsr_md, ig_tm_md);
        slot_map.apply(hdr, meta, ig_dprsr_md);
        stamping.apply(hdr, meta, ig_dprsr_md);
        replication.apply(meta, ig_tm_md);
    }
}

control NfcEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    ReplicationEgress() replication;
    PortTxCounter() port_tx_counter;

    apply {
        replication.apply(hdr, eg_intr_md, eg_dprsr_md);
        port_tx_counter.apply(eg_intr_md, eg_dprsr_md);
    }
}

Pipeline(NfcIngressParser(),
         NfcIngress(),
         NfcIngressDeparser(),
         NfcEgressParser(),
         NfcEgress(),
         NfcEgressDeparser()) pipe;

Switch(pipe) main;
