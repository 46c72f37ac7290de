/*
 * nfcluster data plane: target-neutral constants.
 *
 * Everything a controller or an NF must agree on with the switch is defined here once:
 * EtherTypes, shim kinds and flags, port roles, replication ids and the slot width.
 * The Python side mirrors these values (nf_host/shim.py for the shim, the P4Info for names).
 */
#ifndef NFC_DEFINE_P4
#define NFC_DEFINE_P4

/* Slot width: a slot index has SLOT_BITS bits (1..16); there are SLOT_COUNT slots. */
#ifndef SLOT_BITS
#define SLOT_BITS 12
#endif
#define SLOT_COUNT (1 << SLOT_BITS)

/*
 * Service chains: at most CHAIN_STAGES stages (over every chain of the switch), numbered 0..
 * CHAIN_STAGES-1. Every per-slot register and counter has one cell per (stage, slot), at the
 * slot index stage << SLOT_BITS | slot, which is also the shim's slot field: it must fit in 16
 * bits. A switch without chains uses stage 0 only (slot index = slot).
 */
#ifndef STAGE_BITS
#define STAGE_BITS 2
#endif
#define CHAIN_STAGES (1 << STAGE_BITS)
#define SLOT_SPACE (SLOT_COUNT * CHAIN_STAGES)
#if SLOT_BITS + STAGE_BITS > 16
#error "SLOT_BITS + STAGE_BITS must not exceed 16 (the shim's slot field)"
#endif

typedef bit<9>  port_num_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<16> slot_id_t;
typedef bit<8>  stage_t;
typedef bit<16> epoch_t;
typedef bit<16> nf_id_t;
typedef bit<32> seq_num_t;

/* EtherTypes and IP protocols the parser knows. */
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_NFC  = 0x88B5;   /* the nfcluster shim (local experimental EtherType) */
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;

/* TCP flag bits (in tcp_h.flags). */
const bit<8> TCP_FLAG_SYN = 0x02;
const bit<8> TCP_FLAG_ACK = 0x10;

/* Shim kinds (nfc_shim_h.kind); same values as nf_host.shim.Kind. */
const bit<8> SHIM_KIND_PRIMARY = 1;
const bit<8> SHIM_KIND_BACKUP  = 2;
const bit<8> SHIM_KIND_OUTPUT  = 3;
const bit<8> SHIM_KIND_CONTROL = 4;
/* A slot move's in-band marker: the releasing NF sends it on its data port after its last
   output; the switch passes it, unstamped, to the slot's primary (the adopter) only, so the
   adopter knows every output of the old owner went through before its own (docs/protocols.md §5). */
const bit<8> SHIM_KIND_MARKER  = 5;

/* Shim flag bits (nfc_shim_h.flags). */
const bit<8> SHIM_FLAG_FIRST_OF_EPOCH = 0x01;
const bit<8> SHIM_FLAG_REVERSE        = 0x02;  /* traverses its chain from the last stage back */
/* OUTPUT without a packet (EtherType 0 after the shim): an NF that has dropped many inputs of a
   slot in a row moves the slot's dedup watermark with it, so the watermark never falls 2^31
   numbers behind; checked like output, never forwarded (docs/dataplane.md "Output dedup"). */
const bit<8> SHIM_FLAG_WATERMARK      = 0x04;

/* Port roles, written by the controller into table port_role. 0 means "not classified". */
const bit<8> PORT_ROLE_UNKNOWN = 0;
const bit<8> PORT_ROLE_EDGE    = 1;
const bit<8> PORT_ROLE_NF      = 2;
const bit<8> PORT_ROLE_CPU     = 3;

/* Replication ids of the two copies in a primary's multicast group. */
const bit<16> REPLICA_RID_PRIMARY = 1;
const bit<16> REPLICA_RID_BACKUP  = 2;

/* The port that carries packet-in/packet-out to and from the controller. */
const port_num_t CPU_PORT = 510;

/* Why the output dedup dropped an NF's output (index of counter nf_output_drops). */
#define OUTPUT_DROP_REASONS 5
const bit<32> OUTPUT_DROP_DUPLICATE   = 0;  /* this input's output already left */
const bit<32> OUTPUT_DROP_STALE_EPOCH = 1;  /* output of an epoch before the previous one */
const bit<32> OUTPUT_DROP_BAD_SLOT    = 2;  /* a slot index outside its stage's, or a bad stage */
const bit<32> OUTPUT_DROP_WRONG_STAGE = 3;  /* output of a stage the sending port's NF is not in */
const bit<32> OUTPUT_DROP_WATERMARK   = 4;  /* a watermark frame, its seq accepted: not a loss */

/* IPv4: the most option words a header can carry (ihl 15), the More Fragments flag bit. */
#define IPV4_OPTION_WORDS 10
const bit<3> IPV4_FLAG_MORE_FRAGMENTS = 1;

/* Why SlotMap dropped an edge packet before its slot had an owner (counter slot_map_drops). */
#define SLOT_MAP_DROP_REASONS 1
const bit<32> SLOT_MAP_DROP_ORPHAN_FRAGMENT = 0;  /* a later fragment whose first fragment was not seen */

/* Why PacketIoIngress dropped a non-IPv4 edge packet (counter punt_drops). */
#define PUNT_DROP_REASONS 2
const bit<32> PUNT_DROP_NO_HANDLER = 0;  /* the controller has not enabled the punt (edge_punt) */
const bit<32> PUNT_DROP_OVER_RATE  = 1;  /* punt_meter marked the packet red */

/* Why HandOff dropped a packet (counter handoff_drops). */
#define HANDOFF_DROP_REASONS 1
const bit<32> HANDOFF_DROP_LOCKED = 0;  /* its connection is being handed off: TCP retransmits it */

/* Meter colours (v1model's execute_meter and TNA's Meter.execute agree). */
const bit<2> METER_GREEN  = 0;
const bit<2> METER_YELLOW = 1;
const bit<2> METER_RED    = 2;

/* Receiver id passed to digest() for new-flow reports. */
const bit<32> DIGEST_RECEIVER_NEW_FLOW = 1;

#endif /* NFC_DEFINE_P4 */
