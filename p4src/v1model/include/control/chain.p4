/*
 * Service chains: which stage a packet enters, from the edge or from the stage before.
 *
 * A chain is a list of stages (firewall -> nat -> flow_monitor); each stage has NFs of its
 * own, with their own slot owners, sequence numbers, output commit and dedup, keyed by the
 * slot index (stage, slot). A packet from an edge port enters the stage edge_chain names for
 * that port: the first stage of its chain from the chain's inside edge, or the last stage, in
 * reverse, from its outside edge. Output accepted from stage k goes on to the stage
 * stage_next names for (k, direction), restamped there with that stage's own per-slot
 * sequence number (SlotMap, Stamping), or, when there is none, to its edge port
 * (EdgeForwarding). The slot is computed at the edge and carried from stage to stage, except
 * after a stage that rewrites addresses (a NAT: stage_next's rehash), whose output's slot is
 * computed again from its rewritten headers: so both directions of a connection meet in one
 * slot on each side of the rewrite (docs/protocols.md, "Service chains").
 */
#ifndef NFC_V1MODEL_CHAIN_P4
#define NFC_V1MODEL_CHAIN_P4

control ChainSteering(inout headers_t hdr,
                      inout local_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    action enter_chain(bit<8> stage, bit<1> reverse) {
        meta.stage = stage;
        meta.reverse = reverse;
    }

    /*
     * edge_chain: exact on the ingress (edge) port -> the stage its packets enter and their
     * direction. Written by the controller at start-up from the configuration's chains; the
     * default, stage 0 forward, serves a switch without chains.
     */
    table edge_chain {
        key = {
            standard_metadata.ingress_port: exact @name("port");
        }
        actions = {
            enter_chain;
        }
        default_action = enter_chain(0, 0);
        size = EDGE_CHAIN_TABLE_SIZE;
    }

    action to_stage(bit<8> stage, bit<1> rehash) {
        meta.chained = true;
        meta.stage = stage;
        meta.rehash = (rehash == 1);
    }

    action to_edge() {
        meta.chained = false;
    }

    /*
     * stage_next: exact on (stage, direction) of accepted NF output -> the next stage, and
     * whether the stage just left rewrites addresses (rehash). Written by the controller at
     * start-up from the chains; a miss (the last stage, or no chains) sends the output to the
     * edge.
     */
    table stage_next {
        key = {
            meta.stage: exact @name("stage");
            meta.reverse: exact @name("reverse");
        }
        actions = {
            to_stage;
            @defaultonly to_edge;
        }
        const default_action = to_edge();
        size = STAGE_NEXT_TABLE_SIZE;
    }

    apply {
        if (!meta.bypass) {
            if (meta.port_role == PORT_ROLE_EDGE && hdr.ipv4.isValid()) {
                edge_chain.apply();
            } else if (meta.accepted) {
                stage_next.apply();
            }
        }
    }
}

#endif /* NFC_V1MODEL_CHAIN_P4 */
