/*
 * p4sim native engine: the ring fast path of `p4sim run --io ring` (p4sim/native/rings.py calls it).
 * Included after pipeline.c in every generated program.
 *
 * One call is one wake-up of the port loop: for every active ring, whole retired blocks of the
 * TPACKET_V3 receive ring (p4sim/io/pktring.py has the layouts) until at least `max_frames` frames,
 * each frame run through the pipeline straight from the ring memory, each output written into the
 * transmit ring of its port; then one send() per ring that got frames. No allocation per packet,
 * no Python object. Outputs the loop does not send itself (to the CPU port, to a port without a
 * ring here or whose ring has `tx_python` set (an impaired port: p4sim/io/impair.py), longer than a
 * transmit slot) stay in the engine's output buffer and are listed in `defer` for Python, which
 * sends them the ordinary way.
 */
#include <errno.h>
#include <sys/socket.h>

#define R_BLOCK_STATUS 8
#define R_NUM_PKTS 12
#define R_FIRST_PKT 16
#define R_TP_NEXT 0
#define R_TP_SNAPLEN 12
#define R_TP_LEN 16
#define R_TP_MAC 24
#define R_PKTTYPE 58
#define R_TX_LEN 16
#define R_TX_STATUS 20
#define R_TX_DATA 48
#define R_OUTGOING 4
#define R_TP_USER 1
#define R_SEND_REQUEST 1
#define R_WRONG_FORMAT 4
#define R_MAX_PORT 512

/* one port's rings and what happened on them during the last call (Python adds the counters to
   the port's PortStats and zeroes them); the layout is declared again in engine.py's CDEF */
typedef struct p4n_ring {
    uint8_t *rxm;             /* receive ring: nblocks blocks of block_size bytes */
    uint8_t *txm;             /* transmit ring: tx_frames slots of tx_frame_size bytes */
    int32_t fd;               /* the socket, for send(); < 0: nothing is sent (unit tests) */
    uint32_t port;
    uint32_t active;          /* 0: not received on (the interface is gone) */
    uint32_t block_size, nblocks, rx_next;
    uint32_t tx_frame_size, tx_frames, tx_next;
    int64_t tx_last;          /* offset in tx of the slot filled last, -1: none yet */
    int64_t rx, rx_truncated, tx, tx_errors, tx_overflows;
    int32_t last_errno;       /* a send() refused the frames (they were given up, tx_errors) */
    uint32_t unsent;          /* frames still wait in the transmit ring after the flush */
    uint32_t tx_python;       /* 1: received on here, but outputs to this port go to Python */
} p4n_ring;

static inline uint32_t p4n_r32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t p4n_r16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static void p4n_ring_abandon(p4n_ring *r) {
    for (uint32_t i = 0; i < r->tx_frames; i++) {
        uint32_t *st = (uint32_t *)(r->txm + (size_t)i * r->tx_frame_size + R_TX_STATUS);
        if (__atomic_load_n(st, __ATOMIC_ACQUIRE) == R_SEND_REQUEST) {
            __atomic_store_n(st, 0, __ATOMIC_RELEASE);
            r->tx_errors++;
            r->tx--;
        }
    }
}

/* hand the queued frames to the device (PacketRing.flush); 0 when some still wait */
static int p4n_ring_flush(p4n_ring *r) {
    if (r->tx_last < 0) return 1;
    if (r->fd >= 0 && send(r->fd, NULL, 0, MSG_DONTWAIT) < 0 && errno != ENOBUFS && errno != EAGAIN) {
        r->last_errno = errno;
        p4n_ring_abandon(r);
    }
    uint32_t *last = (uint32_t *)(r->txm + r->tx_last + R_TX_STATUS);
    return __atomic_load_n(last, __ATOMIC_ACQUIRE) != R_SEND_REQUEST;
}

/* queue one frame (PacketRing.put); 0 when the next slot is still busy */
static int p4n_ring_put(p4n_ring *r, const uint8_t *data, uint32_t n) {
    uint8_t *slot = r->txm + (size_t)r->tx_next * r->tx_frame_size;
    uint32_t *st = (uint32_t *)(slot + R_TX_STATUS);
    uint32_t status = __atomic_load_n(st, __ATOMIC_ACQUIRE);
    if (status == R_WRONG_FORMAT) { r->tx_errors++; r->tx--; }  /* the kernel refused it: lost */
    else if (status != 0) return 0;
    memcpy(slot + R_TX_DATA, data, n);
    memcpy(slot + R_TX_LEN, &n, 4);
    __atomic_store_n(st, R_SEND_REQUEST, __ATOMIC_RELEASE);
    r->tx_last = (int64_t)((size_t)r->tx_next * r->tx_frame_size);
    r->tx_next = (r->tx_next + 1) % r->tx_frames;
    r->tx++;
    return 1;
}

static void p4n_ring_defer(p4n_ctx *c, uint32_t i) {
    if (c->ndefer == c->capdefer) {
        c->capdefer = c->capdefer ? c->capdefer * 2 : 64;
        c->defer = realloc(c->defer, c->capdefer * sizeof(uint32_t));
    }
    c->defer[c->ndefer++] = i;
}

/* One wake-up. Returns the frames received (run through the pipeline); *nsent is the outputs
   written into transmit rings; *ndefer outputs are left to Python: (input index, port, offset,
   length) at ometa[4 * defer[k]] in odata (valid until the next call). */
uint32_t p4n_ring_run(void *cv, p4n_ring *rings, uint32_t n, uint32_t max_frames, int64_t cpu_port,
                      uint64_t *nsent, const uint32_t **defer, uint32_t *ndefer,
                      const uint8_t **odata, const uint32_t **ometa) {
    p4n_ctx *c = cv;
    int16_t by_port[R_MAX_PORT];
    uint8_t dirty[256];
    memset(by_port, 0xff, sizeof by_port);
    memset(dirty, 0, sizeof dirty);
    for (uint32_t k = 0; k < n && k < 256; k++) {
        rings[k].last_errno = 0;
        rings[k].unsent = 0;
        if (rings[k].port < R_MAX_PORT && (int64_t)rings[k].port != cpu_port && !rings[k].tx_python)
            by_port[rings[k].port] = (int16_t)k;
    }
    c->out_n = 0;
    c->nout = 0;
    c->ndefer = 0;
    uint32_t got = 0;
    uint64_t sent = 0;
    for (uint32_t k = 0; k < n && k < 256; k++) {
        p4n_ring *r = &rings[k];
        if (!r->active) continue;
        uint32_t taken = 0;
        while (taken < max_frames) {
            uint8_t *blk = r->rxm + (size_t)r->rx_next * r->block_size;
            uint32_t *bst = (uint32_t *)(blk + R_BLOCK_STATUS);
            if (!(__atomic_load_n(bst, __ATOMIC_ACQUIRE) & R_TP_USER)) break;
            uint32_t count = p4n_r32(blk + R_NUM_PKTS);
            const uint8_t *f = blk + p4n_r32(blk + R_FIRST_PKT);
            for (uint32_t j = 0; j < count; j++) {
                uint32_t nxt = p4n_r32(f + R_TP_NEXT), snap = p4n_r32(f + R_TP_SNAPLEN);
                if (f[R_PKTTYPE] != R_OUTGOING) {
                    if (snap < p4n_r32(f + R_TP_LEN)) {
                        r->rx_truncated++;  /* longer than a block: cut short, dropped */
                    } else {
                        r->rx++;
                        got++;
                        uint32_t first = c->nout;
                        c->cur_in = got - 1;
                        p4n_process_one(c, r->port, f + p4n_r16(f + R_TP_MAC), snap);
                        for (uint32_t i = first; i < c->nout; i++) {
                            const uint32_t *m = &c->meta[(size_t)i * 4];
                            uint32_t port = m[1], len = m[3];
                            int16_t to = port < R_MAX_PORT ? by_port[port] : -1;
                            if (to < 0 || len > rings[to].tx_frame_size - R_TX_DATA) {
                                p4n_ring_defer(c, i);
                                continue;
                            }
                            p4n_ring *o = &rings[to];
                            const uint8_t *data = c->out + m[2];
                            if (!p4n_ring_put(o, data, len)) {
                                p4n_ring_flush(o);
                                if (!p4n_ring_put(o, data, len)) { o->tx_overflows++; continue; }
                            }
                            dirty[to] = 1;
                            sent++;
                        }
                        if (c->ndefer == 0) { c->out_n = 0; c->nout = 0; }  /* all sent: reuse */
                    }
                }
                if (!nxt) break;
                f += nxt;
            }
            __atomic_store_n(bst, 0, __ATOMIC_RELEASE);  /* back to the kernel */
            r->rx_next = (r->rx_next + 1) % r->nblocks;
            taken += count;
        }
    }
    for (uint32_t k = 0; k < n && k < 256; k++)
        if (dirty[k]) rings[k].unsent = !p4n_ring_flush(&rings[k]);
    *nsent = sent;
    *defer = c->defer;
    *ndefer = c->ndefer;
    *odata = c->out;
    *ometa = c->meta;
    return got;
}
