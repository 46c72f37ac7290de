/*
 * nfcluster data plane: headers, the digest type and the metadata carried between controls.
 * Header types end in _h, struct types in _t. Shared by the v1model and TNA programs.
 */
#ifndef NFC_HEADER_P4
#define NFC_HEADER_P4

#include "define.p4"

/* Packet-out metadata: the controller names the port to send the payload from. */
@controller_header("packet_out")
header packet_out_h {
    bit<9> egress_port;
    bit<7> _pad;
}

/* Packet-in metadata: the port the packet arrived on (CPU_PORT for a looped-back probe). */
@controller_header("packet_in")
header packet_in_h {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/*
 * The nfcluster shim, 16 bytes, between Ethernet and the original EtherType's header.
 * Layout and Python codec: nf_host/shim.py; described in docs/dataplane.md.
 */
header nfc_shim_h {
    bit<8>    kind;        /* SHIM_KIND_* */
    bit<8>    flags;       /* SHIM_FLAG_* */
    stage_t   stage;       /* service-chain stage the packet is in (0 without chains) */
    bit<8>    reserved;
    slot_id_t slot;        /* slot index: stage << SLOT_BITS | slot */
    epoch_t   epoch;
    nf_id_t   nf_id;       /* target NF of this copy */
    seq_num_t seq;         /* per-slot sequence number */
    bit<16>   ether_type;  /* the original EtherType */
}

header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

/* One 32-bit word of IPv4 options: a header with ihl > 5 carries ihl - 5 of them (at most 10). */
header ipv4_option_word_h {
    bit<32> word;
}

header tcp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

struct headers_t {
    packet_out_h packet_out;
    packet_in_h  packet_in;
    ethernet_h   ethernet;
    nfc_shim_h   nfc_shim;
    ipv4_h       ipv4;
    ipv4_option_word_h[IPV4_OPTION_WORDS] ipv4_options;
    tcp_h        tcp;
    udp_h        udp;
}

/* Digest sent to the controller for every new flow (TCP SYN, first UDP packet of a slot's epoch). */
struct new_flow_t {
    slot_id_t   slot;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
    bit<16>     src_port;
    bit<16>     dst_port;
    bit<8>      protocol;
}

/* The TNA program's output-dedup register cell: hi = epoch, lo = seq (v1model: two registers). */
struct dedup_pair_t {
    bit<32> hi;
    bit<32> lo;
}

/* Metadata the controls hand to each other (and, in v1model, to egress and to every replica). */
struct local_metadata_t {
    bit<8>     port_role;    /* PORT_ROLE_* of the ingress port */
    bool       bypass;       /* the packet's fate is decided; later ingress controls skip it */
    bool       owned;        /* a packet entering a stage whose slot has an owner: stamped, replicated */
    bit<16>    l4_src_port;  /* 0 when the packet has no TCP/UDP header */
    bit<16>    l4_dst_port;
    slot_id_t  slot;         /* the slot within its stage (0..SLOT_COUNT-1) */
    slot_id_t  slot_index;   /* stage << SLOT_BITS | slot: per-slot cells, the shim's slot */
    stage_t    stage;        /* the stage the packet enters (edge_chain, or stage_next) */
    bit<1>     reverse;      /* 1: traverses its chain from the last stage back to the first */
    bool       accepted;     /* NF output let through by the output dedup (next stage or edge) */
    bool       chained;      /* accepted NF output that goes on to its next stage */
    bool       rehash;       /* with chained: its slot is recomputed from its (rewritten) headers */
    bool       marker;       /* a move's marker from an NF: to its slot's primary, not stamped */
    bit<16>    group;        /* multicast group of the slot's primary */
    epoch_t    epoch;
    nf_id_t    primary;
    seq_num_t  seq_base;     /* added to the slot's count of stamped packets (slot_owner's seq_base) */
    new_flow_t new_flow;
    bit<2>     punt_color;   /* colour of punt_meter for a punted non-IPv4 edge packet */
}

#endif /* NFC_HEADER_P4 */
