/*
 * p4sim native engine: the fixed part of every generated program (helpers, tables, externs).
 *
 * The generated C (p4sim/native/ccompiler.py) defines the program's sizes (NSLOTS, KMAX, ...)
 * and includes this file, then its own functions, then pipeline.c (the v1model pipeline and the
 * C API). Every value is a uint64_t slot in `s` as in the Python engine's flat list; this file
 * mirrors p4sim/runtime/primitives.py, p4sim/runtime/tables.py and p4sim/runtime/meters.py, which stay the reference.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define P4N_MISS 0
#define HIT ((uint64_t)1 << 32)

/* ------------------------------------------------------------------ arithmetic */
static inline uint64_t p4n_shl(uint64_t a, uint64_t b, unsigned w, uint64_t mask) {
    return b < w ? (a << b) & mask : 0;
}
static inline uint64_t p4n_shr(uint64_t a, uint64_t b) { return b < 64 ? a >> b : 0; }
static inline uint64_t p4n_div(uint64_t a, uint64_t b) { return b ? a / b : 0; }
static inline uint64_t p4n_mod(uint64_t a, uint64_t b) { return b ? a % b : 0; }
static inline uint64_t p4n_sadd(uint64_t a, uint64_t b, uint64_t mask) {
    uint64_t r = a + b;
    return (r < a || r > mask) ? mask : r;
}
static inline uint64_t p4n_ssub(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }
/* int<w>: a slot holds the value sign-extended to 64 bits (the Python engine's int modulo 2^64) */
static inline uint64_t p4n_sx(uint64_t v, unsigned w) {
    return w >= 64 ? v : (uint64_t)((int64_t)(v << (64 - w)) >> (64 - w));
}
static inline uint64_t p4n_sar(uint64_t a, uint64_t b) { return (uint64_t)((int64_t)a >> (b < 63 ? b : 63)); }
/* a |+| b (sub 0) or a |-| b (sub 1) of two int<w>, saturating to int<w>'s range */
static inline uint64_t p4n_ssat(uint64_t a, uint64_t b, int sub, unsigned w) {
    int64_t hi = w >= 64 ? INT64_MAX : (int64_t)(((uint64_t)1 << (w - 1)) - 1), lo = -hi - 1, r;
    int over = sub ? __builtin_sub_overflow((int64_t)a, (int64_t)b, &r)
                   : __builtin_add_overflow((int64_t)a, (int64_t)b, &r);
    if (over) r = (int64_t)a < 0 ? lo : hi;
    return (uint64_t)(r < lo ? lo : r > hi ? hi : r);
}

/* bit<N>/int<N> with 64 < N <= 128: an unsigned __int128 (int<N> sign-extended to 128 bits),
   stored in two slots, the low 64 bits first */
typedef unsigned __int128 p4n_u128;
#define P4N_U128(hi, lo) (((p4n_u128)(hi) << 64) | (p4n_u128)(lo))
static inline p4n_u128 p4n_ld128(const uint64_t *p) { return P4N_U128(p[1], p[0]); }
static inline void p4n_st128(uint64_t *p, p4n_u128 v) { p[0] = (uint64_t)v; p[1] = (uint64_t)(v >> 64); }
static inline uint64_t p4n_amt(p4n_u128 b) { return b > 255 ? 255 : (uint64_t)b; }
static inline p4n_u128 p4n_sx128(p4n_u128 v, unsigned w) {
    return w >= 128 ? v : (p4n_u128)((__int128)(v << (128 - w)) >> (128 - w));
}
static inline p4n_u128 p4n_shl128(p4n_u128 a, p4n_u128 b, unsigned w, p4n_u128 mask) {
    return b < w ? (a << b) & mask : 0;
}
static inline p4n_u128 p4n_shr128(p4n_u128 a, p4n_u128 b) { return b < 128 ? a >> b : 0; }
static inline p4n_u128 p4n_sar128(p4n_u128 a, p4n_u128 b) { return (p4n_u128)((__int128)a >> (b < 127 ? b : 127)); }
static inline p4n_u128 p4n_div128(p4n_u128 a, p4n_u128 b) { return b ? a / b : 0; }
static inline p4n_u128 p4n_mod128(p4n_u128 a, p4n_u128 b) { return b ? a % b : 0; }
static inline p4n_u128 p4n_sadd128(p4n_u128 a, p4n_u128 b, p4n_u128 mask) {
    p4n_u128 r = a + b;
    return (r < a || r > mask) ? mask : r;
}
static inline p4n_u128 p4n_ssub128(p4n_u128 a, p4n_u128 b) { return a > b ? a - b : 0; }
static inline p4n_u128 p4n_ssat128(p4n_u128 a, p4n_u128 b, int sub, unsigned w) {
    __int128 hi = (__int128)((((p4n_u128)1) << (w - 1)) - 1), lo = -hi - 1, r;
    int over = sub ? __builtin_sub_overflow((__int128)a, (__int128)b, &r)
                   : __builtin_add_overflow((__int128)a, (__int128)b, &r);
    if (over) r = (__int128)a < 0 ? lo : hi;
    return (p4n_u128)(r < lo ? lo : r > hi ? hi : r);
}

/* ------------------------------------------------------------------ bits of a byte buffer */
static inline uint64_t p4n_getbits(const uint8_t *p, unsigned off, unsigned w) {
    const uint8_t *q = p + (off >> 3);
    unsigned sh = off & 7, nb = (sh + w + 7) >> 3, i;
    unsigned __int128 v = 0;
    for (i = 0; i < nb; i++) v = (v << 8) | q[i];
    v >>= nb * 8 - sh - w;
    return (uint64_t)v & (w >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << w) - 1));
}
/* OR the w-bit value v into zeroed bytes at bit offset off */
static inline void p4n_putbits(uint8_t *p, unsigned off, unsigned w, uint64_t v) {
    uint8_t *q = p + (off >> 3);
    unsigned sh = off & 7, nb = (sh + w + 7) >> 3, i;
    unsigned __int128 x = (unsigned __int128)(w >= 64 ? v : (v & (((uint64_t)1 << w) - 1)));
    x <<= nb * 8 - sh - w;
    for (i = nb; i-- > 0;) { q[i] |= (uint8_t)x; x >>= 8; }
}

/* a field of 64 < w <= 128 bits */
static inline p4n_u128 p4n_getbits128(const uint8_t *p, unsigned off, unsigned w) {
    return P4N_U128(p4n_getbits(p, off, w - 64), p4n_getbits(p, off + w - 64, 64));
}
static inline void p4n_putbits128(uint8_t *p, unsigned off, unsigned w, p4n_u128 v) {
    p4n_putbits(p, off, w - 64, (uint64_t)(v >> 64));
    p4n_putbits(p, off + w - 64, 64, (uint64_t)v);
}

/* BMv2's BufBuilder: fields packed bit by bit, most significant first, zero padding at the end */
typedef struct { uint8_t *buf; unsigned nbits; } p4n_bb;
static inline void p4n_bb_put(p4n_bb *b, uint64_t v, unsigned w) {
    unsigned end = b->nbits + w, i;
    for (i = (b->nbits + 7) >> 3; i < ((end + 7) >> 3); i++) b->buf[i] = 0;
    p4n_putbits(b->buf, b->nbits, w, v);
    b->nbits = end;
}
static inline void p4n_bb_put128(p4n_bb *b, p4n_u128 v, unsigned w) {
    p4n_bb_put(b, (uint64_t)(v >> 64), w - 64);
    p4n_bb_put(b, (uint64_t)v, 64);
}

/* ------------------------------------------------------------------ hashes and checksums */
static uint16_t P4N_CRC16[256];
static uint32_t P4N_CRC32[256];
static void p4n_init_crc(void) {
    for (unsigned i = 0; i < 256; i++) {
        unsigned c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xA001 : c >> 1;
        P4N_CRC16[i] = (uint16_t)c;
        uint32_t d = i;
        for (int k = 0; k < 8; k++) d = (d & 1) ? (d >> 1) ^ 0xEDB88320u : d >> 1;
        P4N_CRC32[i] = d;
    }
}
static uint64_t p4n_crc16(const uint8_t *p, size_t n) {
    unsigned c = 0;
    for (size_t i = 0; i < n; i++) c = (c >> 8) ^ P4N_CRC16[(c ^ p[i]) & 0xFF];
    return c;
}
static uint64_t p4n_crc32(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = (c >> 8) ^ P4N_CRC32[(c ^ p[i]) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}
static uint64_t p4n_csum16(const uint8_t *p, size_t n) {
    uint64_t t = 0;
    size_t i;
    for (i = 0; i + 1 < n; i += 2) t += (uint64_t)p[i] << 8 | p[i + 1];
    if (n & 1) t += (uint64_t)p[n - 1] << 8;
    while (t >> 16) t = (t & 0xFFFF) + (t >> 16);
    return ~t & 0xFFFF;
}
static uint64_t p4n_xor16(const uint8_t *p, size_t n) {
    uint64_t r = 0;
    size_t i;
    for (i = 0; i + 1 < n; i += 2) r ^= (uint64_t)p[i] << 8 | p[i + 1];
    if (n & 1) r ^= (uint64_t)p[n - 1] << 8;
    return r;
}
static uint64_t p4n_identity(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < 8; i++) v = v << 8 | p[i];
    return v;
}

/* CPython's hash of a tuple of non-negative ints (the Python engine picks a selector member with
   hash(key) % len(members)) */
static int64_t p4n_pyhash(const uint64_t *k, unsigned n) {
    const uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL, P5 = 2870177450012600261ULL;
    uint64_t acc = P5;
    for (unsigned i = 0; i < n; i++) {
        uint64_t lane = k[i] % 2305843009213693951ULL; /* 2**61 - 1 */
        acc += lane * P2;
        acc = (acc << 31) | (acc >> 33);
        acc *= P1;
    }
    acc += (uint64_t)n ^ (P5 ^ 3527539ULL);
    if (acc == ~(uint64_t)0) return 1546275796;
    return (int64_t)acc;
}

/* ------------------------------------------------------------------ a u64 -> int32 map */
typedef struct { uint64_t *keys; int32_t *vals; uint32_t cap, n; } p4n_map;
static uint64_t p4n_mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}
static int32_t p4n_map_get(const p4n_map *m, uint64_t k) {
    if (!m->cap) return -1;
    uint32_t i = (uint32_t)p4n_mix(k) & (m->cap - 1);
    while (m->vals[i] != -1) {
        if (m->keys[i] == k) return m->vals[i];
        i = (i + 1) & (m->cap - 1);
    }
    return -1;
}
static void p4n_map_put(p4n_map *m, uint64_t k, int32_t v);
static void p4n_map_grow(p4n_map *m) {
    p4n_map old = *m;
    m->cap = old.cap ? old.cap * 2 : 16;
    m->n = 0;
    m->keys = calloc(m->cap, sizeof(uint64_t));
    m->vals = malloc(m->cap * sizeof(int32_t));
    memset(m->vals, 0xff, m->cap * sizeof(int32_t));
    for (uint32_t i = 0; i < old.cap; i++)
        if (old.vals[i] != -1) p4n_map_put(m, old.keys[i], old.vals[i]);
    free(old.keys);
    free(old.vals);
}
static void p4n_map_put(p4n_map *m, uint64_t k, int32_t v) {
    if ((m->n + 1) * 2 > m->cap) p4n_map_grow(m);
    uint32_t i = (uint32_t)p4n_mix(k) & (m->cap - 1);
    while (m->vals[i] != -1) {
        if (m->keys[i] == k) { m->vals[i] = v; return; }
        i = (i + 1) & (m->cap - 1);
    }
    m->keys[i] = k;
    m->vals[i] = v;
    m->n++;
}
static void p4n_map_del(p4n_map *m, uint64_t k) {
    if (!m->cap) return;
    uint32_t i = (uint32_t)p4n_mix(k) & (m->cap - 1);
    while (m->vals[i] != -1) {
        if (m->keys[i] == k) break;
        i = (i + 1) & (m->cap - 1);
    }
    if (m->vals[i] == -1) return;
    m->vals[i] = -1;
    m->n--;
    /* re-insert the rest of the cluster (linear probing deletion) */
    uint32_t j = (i + 1) & (m->cap - 1);
    while (m->vals[j] != -1) {
        uint64_t kk = m->keys[j];
        int32_t vv = m->vals[j];
        m->vals[j] = -1;
        m->n--;
        p4n_map_put(m, kk, vv);
        j = (j + 1) & (m->cap - 1);
    }
}
static void p4n_map_free(p4n_map *m) { free(m->keys); free(m->vals); memset(m, 0, sizeof *m); }

/* ------------------------------------------------------------------ tables (p4sim/runtime/tables.py) */
/* a key wider than 64 bits is two columns, its high 64 bits first; a range of them is
   K_RANGE_HI (compared as one 128-bit number with the K_RANGE_LO column after it) */
enum { K_EXACT, K_LPM, K_TERNARY, K_RANGE, K_OPTIONAL, K_RANGE_HI, K_RANGE_LO };
enum { M_KEYLESS, M_LEVELS, M_LINEAR };

typedef struct {
    unsigned nkeys, mode, needs_priority;
    int profile; /* action profile index, -1: none */
    unsigned kinds[KMAX];
} p4n_tdesc;

typedef struct {
    uint64_t key[KMAX];  /* value (masked), or the low end of a range */
    uint64_t mask[KMAX]; /* mask, or the high end of a range */
    int64_t prio;
    uint64_t seq;
    uint32_t action;     /* global action number, 0: none */
    int64_t member, group;
    uint64_t args[AMAX];
    uint64_t packets, bytes;
    unsigned live, popcount;
} p4n_entry;

typedef struct {
    uint64_t mask[KMAX];
    unsigned bits;
    int32_t *slots; /* open addressing over entry indices, -1 empty */
    uint32_t cap, n;
} p4n_level;

typedef struct {
    const p4n_tdesc *d;
    p4n_entry *e;
    uint32_t n, cap;
    int32_t *freel;
    uint32_t nfree;
    p4n_level *lv;
    uint32_t nlv;
    int32_t *order;
    uint32_t norder;
    uint32_t def_action;
    uint64_t def_args[AMAX];
    uint64_t seq;
} p4n_table;

static uint64_t p4n_keyhash(const uint64_t *k, unsigned n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (unsigned i = 0; i < n; i++) h = p4n_mix(h ^ k[i]) + i;
    return h;
}

static void p4n_level_put(p4n_table *t, p4n_level *l, int32_t idx);
static void p4n_level_grow(p4n_table *t, p4n_level *l) {
    int32_t *old = l->slots;
    uint32_t oc = l->cap;
    l->cap = oc ? oc * 2 : 16;
    l->n = 0;
    l->slots = malloc(l->cap * sizeof(int32_t));
    memset(l->slots, 0xff, l->cap * sizeof(int32_t));
    for (uint32_t i = 0; i < oc; i++)
        if (old[i] >= 0) p4n_level_put(t, l, old[i]);
    free(old);
}
static void p4n_level_put(p4n_table *t, p4n_level *l, int32_t idx) {
    if ((l->n + 1) * 2 > l->cap) p4n_level_grow(t, l);
    unsigned nk = t->d->nkeys;
    uint32_t i = (uint32_t)p4n_keyhash(t->e[idx].key, nk) & (l->cap - 1);
    while (l->slots[i] >= 0) i = (i + 1) & (l->cap - 1);
    l->slots[i] = idx;
    l->n++;
}
static void p4n_level_del(p4n_table *t, p4n_level *l, int32_t idx) {
    uint32_t i = (uint32_t)p4n_keyhash(t->e[idx].key, t->d->nkeys) & (l->cap - 1);
    while (l->slots[i] != idx) i = (i + 1) & (l->cap - 1);
    l->slots[i] = -1;
    l->n--;
    uint32_t j = (i + 1) & (l->cap - 1);
    while (l->slots[j] >= 0) {
        int32_t v = l->slots[j];
        l->slots[j] = -1;
        l->n--;
        p4n_level_put(t, l, v);
        j = (j + 1) & (l->cap - 1);
    }
}
static inline int32_t p4n_level_get(const p4n_table *t, const p4n_level *l, const uint64_t *mk) {
    unsigned nk = t->d->nkeys;
    uint32_t i = (uint32_t)p4n_keyhash(mk, nk) & (l->cap - 1);
    int32_t v;
    while ((v = l->slots[i]) >= 0) {
        const uint64_t *k = t->e[v].key;
        unsigned j = 0;
        while (j < nk && k[j] == mk[j]) j++;
        if (j == nk) return v;
        i = (i + 1) & (l->cap - 1);
    }
    return -1;
}

static int p4n_order_cmp_prio(const p4n_table *t, int32_t a, int32_t b) {
    const p4n_entry *x = &t->e[a], *y = &t->e[b];
    if (t->d->needs_priority) {
        if (x->prio != y->prio) return x->prio > y->prio ? -1 : 1;
    } else if (x->popcount != y->popcount) {
        return x->popcount > y->popcount ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* insertion sort keeps it simple: the order is rebuilt on every write, as the Python engine does */
static void p4n_order_rebuild(p4n_table *t) {
    free(t->order);
    t->order = malloc((t->n + 1) * sizeof(int32_t));
    t->norder = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        if (!t->e[i].live) continue;
        uint32_t j = t->norder++;
        while (j > 0 && p4n_order_cmp_prio(t, (int32_t)i, t->order[j - 1]) < 0) {
            t->order[j] = t->order[j - 1];
            j--;
        }
        t->order[j] = (int32_t)i;
    }
}

static void p4n_table_link(p4n_table *t, int32_t idx) {
    const p4n_tdesc *d = t->d;
    if (d->mode == M_LEVELS) {
        p4n_entry *e = &t->e[idx];
        uint32_t li;
        for (li = 0; li < t->nlv; li++)
            if (!memcmp(t->lv[li].mask, e->mask, sizeof(uint64_t) * d->nkeys)) break;
        if (li == t->nlv) {
            t->lv = realloc(t->lv, (t->nlv + 1) * sizeof(p4n_level));
            /* longest prefix first */
            li = 0;
            while (li < t->nlv && t->lv[li].bits >= e->popcount) li++;
            memmove(&t->lv[li + 1], &t->lv[li], (t->nlv - li) * sizeof(p4n_level));
            memset(&t->lv[li], 0, sizeof(p4n_level));
            memcpy(t->lv[li].mask, e->mask, sizeof(uint64_t) * d->nkeys);
            t->lv[li].bits = e->popcount;
            t->nlv++;
        }
        p4n_level_put(t, &t->lv[li], idx);
    } else if (d->mode == M_LINEAR) {
        p4n_order_rebuild(t);
    }
}

static void p4n_table_unlink(p4n_table *t, int32_t idx) {
    const p4n_tdesc *d = t->d;
    if (d->mode == M_LEVELS) {
        p4n_entry *e = &t->e[idx];
        for (uint32_t li = 0; li < t->nlv; li++) {
            if (!memcmp(t->lv[li].mask, e->mask, sizeof(uint64_t) * d->nkeys)) {
                p4n_level_del(t, &t->lv[li], idx);
                if (t->lv[li].n == 0) {
                    free(t->lv[li].slots);
                    memmove(&t->lv[li], &t->lv[li + 1], (t->nlv - li - 1) * sizeof(p4n_level));
                    t->nlv--;
                }
                return;
            }
        }
    } else if (d->mode == M_LINEAR) {
        t->e[idx].live = 0;
        p4n_order_rebuild(t);
    }
}

static inline int32_t p4n_lookup(const p4n_table *t, const uint64_t *k) {
    const p4n_tdesc *d = t->d;
    unsigned nk = d->nkeys;
    if (d->mode == M_LEVELS) {
        uint64_t mk[KMAX];
        for (uint32_t li = 0; li < t->nlv; li++) {
            const p4n_level *l = &t->lv[li];
            for (unsigned j = 0; j < nk; j++) mk[j] = k[j] & l->mask[j];
            int32_t v = p4n_level_get(t, l, mk);
            if (v >= 0) return v;
        }
        return -1;
    }
    if (d->mode == M_LINEAR) {
        for (uint32_t i = 0; i < t->norder; i++) {
            const p4n_entry *e = &t->e[t->order[i]];
            unsigned j;
            for (j = 0; j < nk; j++) {
                if (d->kinds[j] == K_RANGE) {
                    if (k[j] < e->key[j] || k[j] > e->mask[j]) break;
                } else if (d->kinds[j] == K_RANGE_HI) {
                    p4n_u128 v = P4N_U128(k[j], k[j + 1]);
                    if (v < P4N_U128(e->key[j], e->key[j + 1]) || v > P4N_U128(e->mask[j], e->mask[j + 1])) break;
                    j++;
                } else if ((k[j] & e->mask[j]) != e->key[j]) {
                    break;
                }
            }
            if (j == nk) return t->order[i];
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ action profiles */
typedef struct { uint32_t action; uint64_t args[AMAX]; } p4n_member;
typedef struct { uint64_t *mids; uint32_t n; } p4n_group;
typedef struct {
    p4n_map mids, gids;
    p4n_member *m;
    uint32_t nm, capm;
    int32_t *mfree;
    uint32_t nmfree;
    p4n_group *g;
    uint32_t ng, capg;
    int32_t *gfree;
    uint32_t ngfree;
} p4n_profile;

/* the member an entry of a profile table runs (NULL: none, a hit without an action) */
static inline const p4n_member *p4n_resolve(const p4n_profile *p, const p4n_entry *e, const uint64_t *sel, unsigned nsel) {
    int64_t mid = e->member;
    if (e->group >= 0) {
        int32_t gi = p4n_map_get(&p->gids, (uint64_t)e->group);
        if (gi < 0) return NULL;
        const p4n_group *g = &p->g[gi];
        if (!g->n) return NULL;
        int64_t h = g->n > 1 ? p4n_pyhash(sel, nsel) : 0;
        int64_t r = h % (int64_t)g->n;
        if (r < 0) r += g->n;
        mid = (int64_t)g->mids[r];
    }
    if (mid < 0) return NULL;
    int32_t mi = p4n_map_get(&p->mids, (uint64_t)mid);
    return mi < 0 ? NULL : &p->m[mi];
}

/* ------------------------------------------------------------------ meters (p4sim/runtime/meters.py) */
typedef struct { int on; double cir, cburst, pir, pburst, tc, tp, at; } p4n_meter;
static double p4n_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static uint64_t p4n_meter_mark(p4n_meter *m, double now, double units) {
    if (!m->on) return 0;
    double el = now - m->at;
    if (el < 0) el = 0;
    m->at = now;
    m->tc = m->tc + el * m->cir < m->cburst ? m->tc + el * m->cir : m->cburst;
    m->tp = m->tp + el * m->pir < m->pburst ? m->tp + el * m->pir : m->pburst;
    if (m->tp + 1e-6 < units) return 2;
    m->tp = m->tp - units > 0 ? m->tp - units : 0;
    if (m->tc + 1e-6 < units) return 1;
    m->tc = m->tc - units > 0 ? m->tc - units : 0;
    return 0;
}

/* ------------------------------------------------------------------ the engine's state */
typedef struct {
    uint32_t port;
    uint8_t *data;
    uint32_t len, itype, depth, nkeep;
    int owned;
    int32_t *kslots;
    uint64_t *kvals;
} p4n_work;

typedef struct { uint32_t n; uint32_t *ports, *rids; uint64_t trunc; } p4n_replicas;

typedef struct p4n_ctx {
    p4n_table tables[NTABLES + 1];
    p4n_profile profiles[NPROFILES + 1];
    uint64_t *cnt_p[NCOUNTERS + 1], *cnt_b[NCOUNTERS + 1];
    uint64_t *reg[NREGISTERS + 1];
    p4n_meter *met[NMETERS + 1];
    /* packet replication engine */
    p4n_map mc, cs;
    p4n_replicas *rep;
    uint32_t nrep, caprep;
    /* the packet being parsed */
    const uint8_t *pk;
    uint32_t pk_n, pk_off, perr;
    void *pjmp[5], *xjmp[5];
    const uint8_t *payload;
    uint32_t payload_n, in_len, budget;
    /* deparser output */
    uint8_t ob[DEPARSE_MAX + 1];
    uint32_t ob_n;
    /* outputs of a process call: bytes, and (input index, port, offset, length) per packet */
    uint8_t *out;
    size_t out_n, out_cap;
    uint32_t *meta;
    uint32_t nout, capmeta, cur_in;
    /* outputs the ring loop leaves to Python (ringloop.c): indices into meta */
    uint32_t *defer;
    uint32_t ndefer, capdefer;
    /* work queue of one input packet */
    p4n_work *work;
    uint32_t whead, wtail, wcap;
    /* digests: (digest index, DMAX values) per record */
    uint32_t *dg_id;
    uint64_t *dg_vals;
    uint32_t ndg, capdg;
    uint64_t dg_dropped;
    uint64_t rng;
    double t0;
    double fixed_now; /* the meters' clock when >= 0 (set from Python: tests inject a clock) */
} p4n_ctx;

static inline double p4n_meter_now(const p4n_ctx *c) { return c->fixed_now >= 0 ? c->fixed_now : p4n_now(); }

#define P4N_PERR(c, code) do { (c)->perr = (code); __builtin_longjmp((c)->pjmp, 1); } while (0)
#define P4N_EXIT(c) __builtin_longjmp((c)->xjmp, 1)

static inline uint64_t p4n_peek(p4n_ctx *c, unsigned bits) {
    unsigned nb = (bits + 7) >> 3;
    if (c->pk_off + nb > c->pk_n) P4N_PERR(c, 1);
    return p4n_getbits(c->pk + c->pk_off, 0, bits);
}

#define P4N_MAX_DIGESTS 65536
static void p4n_digest(p4n_ctx *c, uint32_t id, const uint64_t *v, unsigned n) {
    if (c->ndg >= P4N_MAX_DIGESTS) { c->dg_dropped++; return; }
    if (c->ndg == c->capdg) {
        c->capdg = c->capdg ? c->capdg * 2 : 64;
        c->dg_id = realloc(c->dg_id, c->capdg * sizeof(uint32_t));
        c->dg_vals = realloc(c->dg_vals, (size_t)c->capdg * DMAX * sizeof(uint64_t));
    }
    c->dg_id[c->ndg] = id;
    memcpy(&c->dg_vals[(size_t)c->ndg * DMAX], v, n * sizeof(uint64_t));
    c->ndg++;
}

static uint64_t p4n_rnd(p4n_ctx *c, uint64_t lo, uint64_t hi) {
    uint64_t x = c->rng;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    c->rng = x;
    if (hi < lo) return lo;
    uint64_t span = hi - lo + 1;
    return span ? lo + x % span : x;
}
/* random() into an int<N>: lo, hi and the result are sign-extended */
static uint64_t p4n_srnd(p4n_ctx *c, uint64_t lo, uint64_t hi) {
    if ((int64_t)hi < (int64_t)lo) { (void)p4n_rnd(c, 0, 0); return lo; }
    return lo + p4n_rnd(c, 0, hi - lo);
}

static uint64_t p4n_now_us(p4n_ctx *c) {
    return (uint64_t)((p4n_now() - c->t0) * 1e6) & 0xFFFFFFFFFFFFULL;
}

/* a hash or checksum over field-list bytes, optionally followed by the payload */
static uint64_t p4n_hash_buf(p4n_ctx *c, uint64_t (*fn)(const uint8_t *, size_t), const p4n_bb *b, int with_payload) {
    size_t n = (b->nbits + 7) >> 3;
    if (!with_payload || !c->payload_n) return fn(b->buf, n);
    uint8_t *tmp = malloc(n + c->payload_n);
    memcpy(tmp, b->buf, n);
    memcpy(tmp + n, c->payload, c->payload_n);
    uint64_t r = fn(tmp, n + c->payload_n);
    free(tmp);
    return r;
}
