/*
 * nfcluster data plane: every table, register and counter size, in one place.
 * Per-slot objects are sized from SLOT_SPACE (define.p4: a cell per stage and slot); per-port objects cover the
 * whole 9-bit port space.
 */
#ifndef NFC_SIZE_P4
#define NFC_SIZE_P4

#include "define.p4"

/* per-port counters (no_route_drops, nf_port_drops, port_rx, port_tx): the 9-bit port space */
#define PORT_COUNT               512
#define PORT_ROLE_TABLE_SIZE     512
#define SLOT_OWNER_TABLE_SIZE    SLOT_SPACE
#define NF_PORT_TABLE_SIZE       512
#define EDGE_FORWARD_TABLE_SIZE  1024
/* output dedup: one cell per slot index (stage, slot) and epoch parity */
#define OUTPUT_DEDUP_SIZE        (SLOT_SPACE * 2)
/* service chains: the stage of each NF port, the next stage of each (stage, direction) */
#define NF_STAGE_TABLE_SIZE      512
#define EDGE_CHAIN_TABLE_SIZE    512
#define STAGE_NEXT_TABLE_SIZE    (CHAIN_STAGES * 2)
/* Cells remembering a first fragment's slot for the later fragments of its datagram. */
#define FRAGMENT_MEMORY_SIZE     4096

/* Prism hand-off: two entries (one per direction) per handed-off connection; Prism hosts' routes. */
#define HANDOFF_CONN_TABLE_SIZE  8192
#define HANDOFF_ROUTE_TABLE_SIZE 256

#endif /* NFC_SIZE_P4 */
