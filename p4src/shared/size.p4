/*
 * nfcluster data plane: every table, register and counter size, in one place.
 * Per-slot objects are sized from SLOT_COUNT (define.p4); per-port objects cover the
 * whole 9-bit port space.
 */
#ifndef NFC_SIZE_P4
#define NFC_SIZE_P4

#include "define.p4"

#define PORT_COUNT               512
#define PORT_ROLE_TABLE_SIZE     512
#define SLOT_OWNER_TABLE_SIZE    SLOT_COUNT
#define NF_PORT_TABLE_SIZE       512
#define EDGE_FORWARD_TABLE_SIZE  1024
/* output dedup: one cell per slot and epoch parity */
#define OUTPUT_DEDUP_SIZE        (SLOT_COUNT * 2)
/* Cells remembering a first fragment's slot for the later fragments of its datagram. */
#define FRAGMENT_MEMORY_SIZE     4096

#endif /* NFC_SIZE_P4 */
