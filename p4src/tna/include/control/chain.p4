/* Service chains: the stage a packet enters, from the edge or from the stage before (TNA; NOT
   compiled here). Same tables and actions as the v1model program (docs/dataplane.md). */
#ifndef NFC_TNA_CHAIN_P4
#define NFC_TNA_CHAIN_P4

control ChainSteering(inout headers_t hdr,
                      inout local_metadata_t meta,
                      in ingress_intrinsic_metadata_t ig_intr_md) {

    action enter_chain(bit<8> stage, bit<1> reverse) {
        meta.stage = stage;
        meta.reverse = reverse;
    }

    /* edge_chain: exact on the edge port -> entry stage and direction. Controller: start-up. */
    table edge_chain {
        key = {
            ig_intr_md.ingress_port: exact @name("port");
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

    /* stage_next: exact on (stage, direction) -> next stage, rehash. Controller: start-up. */
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

#endif /* NFC_TNA_CHAIN_P4 */
