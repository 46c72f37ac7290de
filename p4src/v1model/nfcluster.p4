/*
 * nfcluster switch program for v1model (BMv2 simple_switch_grpc and p4sim).
 *
 * Top level only: includes, control instances and their order. Each concern lives in its own
 * file under include/control/; target-neutral definitions in p4src/shared/ (-I p4src/shared).
 * The pipeline and its tables are described in docs/dataplane.md.
 */
#include <core.p4>
#include <v1model.p4>

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
                   inout standard_metadata_t standard_metadata) {
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
        port_rx_counter.apply(standard_metadata);        /* every packet in, by port (first) */
        port_classifier.apply(hdr, meta, standard_metadata);
        packetio.apply(hdr, meta, standard_metadata);
        handoff.apply(hdr, meta, standard_metadata);     /* Prism: handed-off TCP connections */
        output.apply(hdr, meta, standard_metadata);      /* NF output: accepted once, or dropped */
        chain.apply(hdr, meta, standard_metadata);       /* the stage a packet enters, or none */
        forwarding.apply(hdr, meta, standard_metadata);  /* output that left its chain: the edge */
        slot_map.apply(hdr, meta, standard_metadata);    /* entering a stage: slot and owner */
        stamping.apply(hdr, meta, standard_metadata);
        replication.apply(hdr, meta, standard_metadata);
    }
}

control NfcEgress(inout headers_t hdr,
                  inout local_metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    ReplicationEgress() replication;
    PacketIoEgress() packetio;
    PortTxCounter() port_tx_counter;

    apply {
        replication.apply(hdr, meta, standard_metadata);
        packetio.apply(hdr, meta, standard_metadata);
        port_tx_counter.apply(standard_metadata);        /* every packet out, by port (last) */
    }
}

V1Switch(NfcParser(),
         NfcVerifyChecksum(),
         NfcIngress(),
         NfcEgress(),
         NfcComputeChecksum(),
         NfcDeparser()) main;
