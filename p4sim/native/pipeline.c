/*
 * p4sim native engine: the v1model pipeline (p4sim/runtime/v1model.py in C) and the C API the Python
 * side calls through cffi (p4sim/native/engine.py). Included at the end of every generated program.
 */
#define DROP_PORT 511
#define MAX_PASSES 16
#define MAX_EGRESS 4096
enum { NORMAL, I2E, E2E, COALESCED, RECIRC, REPLICATION, RESUBMIT };

__attribute__((noinline)) static int p4n_parse(p4n_ctx *c, uint64_t *s, const uint8_t *data, uint32_t n) {
    c->pk = data;
    c->pk_n = n;
    c->pk_off = 0;
    if (__builtin_setjmp(c->pjmp) == 0) {
        p4n_parser(c, s);
    } else {
        s[S_PARSER_ERROR] = c->perr;
    }
    return 0;
}

__attribute__((noinline)) static void p4n_run(p4n_ctx *c, uint64_t *s, void (*fn)(p4n_ctx *, uint64_t *)) {
#if P4N_HAS_EXIT
    if (__builtin_setjmp(c->xjmp) == 0) fn(c, s);
#else
    fn(c, s);
#endif
}

static uint32_t p4n_payload_off(p4n_ctx *c, uint32_t n) { return c->pk_off < n ? c->pk_off : n; }

static void p4n_push_work(p4n_ctx *c, uint32_t port, const uint8_t *data, uint32_t len, int copy,
                          uint32_t itype, const uint64_t *s, int64_t fl, uint32_t depth) {
    if (c->wtail == c->wcap) {
        if (c->whead > 0) {
            memmove(c->work, c->work + c->whead, (c->wtail - c->whead) * sizeof(p4n_work));
            c->wtail -= c->whead;
            c->whead = 0;
        } else {
            c->wcap = c->wcap ? c->wcap * 2 : 8;
            c->work = realloc(c->work, c->wcap * sizeof(p4n_work));
        }
    }
    p4n_work *w = &c->work[c->wtail++];
    w->port = port;
    w->len = len;
    w->itype = itype;
    w->depth = depth;
    w->owned = copy;
    if (copy) {
        w->data = malloc(len ? len : 1);
        memcpy(w->data, data, len);
    } else {
        w->data = (uint8_t *)data;
    }
    w->nkeep = 0;
    w->kslots = NULL;
    w->kvals = NULL;
    if (s && fl >= 0) {
        const int32_t *slots;
        int n = p4n_field_list(fl, &slots);
        if (n > 0) {
            w->kslots = malloc(n * sizeof(int32_t));
            w->kvals = malloc(n * sizeof(uint64_t));
            for (int i = 0; i < n; i++) { w->kslots[i] = slots[i]; w->kvals[i] = s[slots[i]]; }
            w->nkeep = n;
        }
    }
}

static void p4n_emit_out(p4n_ctx *c, uint32_t port, const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb) {
    if (c->out_n + na + nb > c->out_cap) {
        while (c->out_n + na + nb > c->out_cap) c->out_cap = c->out_cap ? c->out_cap * 2 : 65536;
        c->out = realloc(c->out, c->out_cap);
    }
    if (c->nout == c->capmeta) {
        c->capmeta = c->capmeta ? c->capmeta * 2 : 256;
        c->meta = realloc(c->meta, (size_t)c->capmeta * 4 * sizeof(uint32_t));
    }
    uint32_t *m = &c->meta[(size_t)c->nout * 4];
    m[0] = c->cur_in;
    m[1] = port;
    m[2] = (uint32_t)c->out_n;
    m[3] = na + nb;
    memcpy(c->out + c->out_n, a, na);
    if (nb) memcpy(c->out + c->out_n + na, b, nb);
    c->out_n += na + nb;
    c->nout++;
}

static void p4n_egress_pass(p4n_ctx *c, uint64_t *s, const uint8_t *payload, uint32_t payload_n, uint32_t depth);

static void p4n_clone(p4n_ctx *c, const uint64_t *s, const uint8_t *data, uint32_t data_n, uint32_t in_port,
                      uint32_t itype, uint32_t depth, int from_ingress) {
    uint64_t session = s[H_CLONE_SESSION];
    int64_t fl = (int64_t)s[H_CLONE_FL];
    int32_t ri = p4n_map_get(&c->cs, session);
    if (ri < 0) return;
    const p4n_replicas *r = &c->rep[ri];
    const int32_t *kslots = NULL;
    int nk = fl >= 0 ? p4n_field_list(fl, &kslots) : 0;
    uint64_t kv[NSLOTS + 1];
    for (int i = 0; i < nk; i++) kv[i] = s[kslots[i]];
    const uint8_t *payload = c->payload;
    uint32_t payload_n = c->payload_n;
    for (uint32_t k = 0; k < r->n; k++) {
        uint64_t cs[NSLOTS];
        memset(cs, 0, sizeof cs);
        if (from_ingress) {
            cs[S_INGRESS_PORT] = in_port;
            p4n_parse(c, cs, data, data_n);
            uint32_t off = p4n_payload_off(c, data_n);
            payload = data + off;
            payload_n = data_n - off;
        } else {
            memcpy(cs + NHIDDEN, s + NHIDDEN, (NSLOTS - NHIDDEN) * sizeof(uint64_t));
        }
        for (int m = 0; m < NMETA; m++)
            memset(cs + P4N_META[m][0], 0, (P4N_META[m][1] - P4N_META[m][0]) * sizeof(uint64_t));
        for (int i = 0; i < nk; i++) cs[kslots[i]] = kv[i];
        cs[S_INSTANCE_TYPE] = itype;
        cs[S_EGRESS_PORT] = r->ports[k];
        cs[S_EGRESS_RID] = r->rids[k];
        if (r->trunc) cs[H_TRUNCATE] = r->trunc;
        p4n_egress_pass(c, cs, payload, payload_n, depth + 1);
    }
}

static void p4n_egress_pass(p4n_ctx *c, uint64_t *s, const uint8_t *payload, uint32_t payload_n, uint32_t depth) {
    if (c->budget == 0) return;
    c->budget--;
    c->payload = payload;
    c->payload_n = payload_n;
#if S_EGTS >= 0
    s[S_EGTS] = p4n_now_us(c);
#endif
    uint64_t eport = s[S_EGRESS_PORT];
    s[S_PACKET_LENGTH] = c->in_len;
    s[S_EGRESS_SPEC] = (DROP_PORT + 1) & 0x1FF;
    p4n_run(c, s, p4n_egress);
    if (s[H_CLONE_TYPE] == 2 && depth < MAX_PASSES) {
        uint64_t snap[NSLOTS];
        memcpy(snap, s, sizeof snap);
        p4n_clone(c, snap, NULL, 0, 0, E2E, depth, 0);
        c->payload = payload;
        c->payload_n = payload_n;
    }
    if (s[S_EGRESS_SPEC] == DROP_PORT) return;
    p4n_run(c, s, p4n_compute);
    c->ob_n = 0;
    p4n_deparser(c, s);
    uint32_t na = c->ob_n, nb = payload_n;
    uint64_t trunc = s[H_TRUNCATE];
    if (trunc) {
        if (na > trunc) { na = (uint32_t)trunc; nb = 0; }
        else if (na + nb > trunc) nb = (uint32_t)trunc - na;
    }
    if (s[H_RECIRCULATE]) {
        uint8_t *tmp = malloc(na + nb + 1);
        memcpy(tmp, c->ob, na);
        memcpy(tmp + na, payload, nb);
        p4n_push_work(c, (uint32_t)eport, tmp, na + nb, 1, RECIRC, s, (int64_t)s[H_RECIRCULATE_FL], depth + 1);
        free(tmp);
        return;
    }
    p4n_emit_out(c, (uint32_t)eport, c->ob, na, payload, nb);
}

static void p4n_ingress_pass(p4n_ctx *c, p4n_work *w) {
    uint64_t s[NSLOTS];
    memset(s, 0, sizeof s);
    const uint8_t *data = w->data;
    uint32_t n = w->len;
    s[S_INGRESS_PORT] = w->port;
    s[S_INSTANCE_TYPE] = w->itype;
    s[S_PACKET_LENGTH] = c->in_len = n;
#if S_IGTS >= 0
    s[S_IGTS] = p4n_now_us(c);
#endif
    for (uint32_t i = 0; i < w->nkeep; i++) s[w->kslots[i]] = w->kvals[i];
    p4n_parse(c, s, data, n);
    uint32_t off = p4n_payload_off(c, n);
    const uint8_t *payload = data + off;
    uint32_t payload_n = n - off;
    c->payload = payload;
    c->payload_n = payload_n;
    p4n_run(c, s, p4n_verify);
    p4n_run(c, s, p4n_ingress);
    if (s[H_CLONE_TYPE] == 1) {
        p4n_clone(c, s, data, n, w->port, I2E, w->depth, 1);
    }
    if (s[H_RESUBMIT]) {
        p4n_push_work(c, w->port, data, n, 1, RESUBMIT, s, (int64_t)s[H_RESUBMIT_FL], w->depth + 1);
        return;
    }
    uint64_t grp = s[S_MCAST_GRP];
    if (grp) {
        int32_t ri = p4n_map_get(&c->mc, grp);
        if (ri < 0 || !c->rep[ri].n) return;
        const p4n_replicas *r = &c->rep[ri];
        uint32_t nr = r->n;
        for (uint32_t k = 0; k < nr; k++) {
            uint64_t cs[NSLOTS];
            memcpy(cs, s, sizeof cs);
            cs[S_EGRESS_PORT] = c->rep[ri].ports[k];
            cs[S_EGRESS_RID] = c->rep[ri].rids[k];
            cs[S_INSTANCE_TYPE] = REPLICATION;
            p4n_egress_pass(c, cs, payload, payload_n, w->depth);
        }
        return;
    }
    uint64_t spec = s[S_EGRESS_SPEC];
    if (spec == DROP_PORT) return;
    s[S_EGRESS_PORT] = spec;
    p4n_egress_pass(c, s, payload, payload_n, w->depth);
}

static void p4n_free_work(p4n_work *w) {
    if (w->owned) free(w->data);
    free(w->kslots);
    free(w->kvals);
}

static void p4n_process_one(p4n_ctx *c, uint32_t port, const uint8_t *data, uint32_t n) {
    c->budget = MAX_EGRESS;
    c->whead = c->wtail = 0;
    p4n_push_work(c, port, data, n, 0, NORMAL, NULL, -1, 0);
    while (c->whead < c->wtail) {
        p4n_work w = c->work[c->whead++];
        if (w.depth <= MAX_PASSES) p4n_ingress_pass(c, &w);
        p4n_free_work(&w);
    }
}

/* ------------------------------------------------------------------ C API */
void *p4n_new(uint64_t seed) {
    p4n_init_crc();
    p4n_ctx *c = calloc(1, sizeof(p4n_ctx));
    for (int t = 0; t < NTABLES; t++) c->tables[t].d = &P4N_TDESC[t];
    for (int i = 0; i < NCOUNTERS; i++) {
        c->cnt_p[i] = calloc(P4N_COUNTER_SIZE[i] + 1, sizeof(uint64_t));
        c->cnt_b[i] = calloc(P4N_COUNTER_SIZE[i] + 1, sizeof(uint64_t));
    }
    for (int i = 0; i < NREGISTERS; i++) c->reg[i] = calloc(P4N_REGISTER_SIZE[i] + 1, sizeof(uint64_t));
    for (int i = 0; i < NMETERS; i++) c->met[i] = calloc(P4N_METER_SIZE[i] + 1, sizeof(p4n_meter));
    c->rng = seed ? seed : 0x2545F4914F6CDD1DULL;
    c->t0 = p4n_now();
    c->fixed_now = -1;
    return c;
}

void p4n_free(void *cv) {
    p4n_ctx *c = cv;
    for (int t = 0; t < NTABLES; t++) {
        p4n_table *tb = &c->tables[t];
        for (uint32_t i = 0; i < tb->nlv; i++) free(tb->lv[i].slots);
        free(tb->lv); free(tb->e); free(tb->freel); free(tb->order);
    }
    for (int p = 0; p < NPROFILES; p++) {
        p4n_profile *pr = &c->profiles[p];
        for (uint32_t i = 0; i < pr->ng; i++) free(pr->g[i].mids);
        p4n_map_free(&pr->mids); p4n_map_free(&pr->gids);
        free(pr->m); free(pr->g); free(pr->mfree); free(pr->gfree);
    }
    for (int i = 0; i < NCOUNTERS; i++) { free(c->cnt_p[i]); free(c->cnt_b[i]); }
    for (int i = 0; i < NREGISTERS; i++) free(c->reg[i]);
    for (int i = 0; i < NMETERS; i++) free(c->met[i]);
    for (uint32_t i = 0; i < c->nrep; i++) { free(c->rep[i].ports); free(c->rep[i].rids); }
    free(c->rep);
    p4n_map_free(&c->mc); p4n_map_free(&c->cs);
    free(c->out); free(c->meta); free(c->defer); free(c->work); free(c->dg_id); free(c->dg_vals);
    free(c);
}

/* Process n packets: data holds them back to back, packet i is data[offs[i]:offs[i+1]] from
   ports[i]. Outputs: *odata, and per output 4 words (input index, port, offset, length). */
uint32_t p4n_process(void *cv, const uint8_t *data, const uint32_t *offs, const uint32_t *ports, uint32_t n,
                     const uint8_t **odata, const uint32_t **ometa) {
    p4n_ctx *c = cv;
    c->out_n = 0;
    c->nout = 0;
    for (uint32_t i = 0; i < n; i++) {
        c->cur_in = i;
        p4n_process_one(c, ports[i], data + offs[i], offs[i + 1] - offs[i]);
    }
    *odata = c->out;
    *ometa = c->meta;
    return c->nout;
}

/* tables: key/mask per field (range: low/high); returns the entry's handle */
int32_t p4n_table_insert(void *cv, uint32_t t, const uint64_t *key, const uint64_t *mask, int64_t prio,
                         uint32_t action, const uint64_t *args, int64_t member, int64_t group) {
    p4n_ctx *c = cv;
    p4n_table *tb = &c->tables[t];
    int32_t idx;
    if (tb->nfree) {
        idx = tb->freel[--tb->nfree];
    } else {
        if (tb->n == tb->cap) {
            tb->cap = tb->cap ? tb->cap * 2 : 16;
            tb->e = realloc(tb->e, tb->cap * sizeof(p4n_entry));
        }
        idx = (int32_t)tb->n++;
    }
    p4n_entry *e = &tb->e[idx];
    memset(e, 0, sizeof *e);
    unsigned nk = tb->d->nkeys;
    memcpy(e->key, key, nk * sizeof(uint64_t));
    memcpy(e->mask, mask, nk * sizeof(uint64_t));
    for (unsigned j = 0; j < nk; j++)
        if (tb->d->kinds[j] < K_RANGE_HI && tb->d->kinds[j] != K_RANGE) e->popcount += (unsigned)__builtin_popcountll(mask[j]);
    e->prio = prio;
    e->seq = tb->seq++;
    e->action = action;
    memcpy(e->args, args, AMAX * sizeof(uint64_t));
    e->member = member;
    e->group = group;
    e->live = 1;
    p4n_table_link(tb, idx);
    return idx;
}

void p4n_table_modify(void *cv, uint32_t t, int32_t idx, uint32_t action, const uint64_t *args,
                      int64_t member, int64_t group) {
    p4n_entry *e = &((p4n_ctx *)cv)->tables[t].e[idx];
    e->action = action;
    memcpy(e->args, args, AMAX * sizeof(uint64_t));
    e->member = member;
    e->group = group;
}

void p4n_table_delete(void *cv, uint32_t t, int32_t idx) {
    p4n_table *tb = &((p4n_ctx *)cv)->tables[t];
    p4n_table_unlink(tb, idx);
    tb->e[idx].live = 0;
    if (tb->d->mode == M_LINEAR) p4n_order_rebuild(tb);
    tb->freel = realloc(tb->freel, (tb->nfree + 1) * sizeof(int32_t));
    tb->freel[tb->nfree++] = idx;
}

void p4n_table_set_default(void *cv, uint32_t t, uint32_t action, const uint64_t *args) {
    p4n_table *tb = &((p4n_ctx *)cv)->tables[t];
    tb->def_action = action;
    memcpy(tb->def_args, args, AMAX * sizeof(uint64_t));
}

void p4n_direct_counter(void *cv, uint32_t t, int32_t idx, int write, uint64_t *pb) {
    p4n_entry *e = &((p4n_ctx *)cv)->tables[t].e[idx];
    if (write) { e->packets = pb[0]; e->bytes = pb[1]; }
    else { pb[0] = e->packets; pb[1] = e->bytes; }
}

/* action profiles */
void p4n_member_set(void *cv, uint32_t p, uint64_t mid, uint32_t action, const uint64_t *args) {
    p4n_profile *pr = &((p4n_ctx *)cv)->profiles[p];
    int32_t i = p4n_map_get(&pr->mids, mid);
    if (i < 0) {
        if (pr->nmfree) {
            i = pr->mfree[--pr->nmfree];
        } else {
            if (pr->nm == pr->capm) {
                pr->capm = pr->capm ? pr->capm * 2 : 16;
                pr->m = realloc(pr->m, pr->capm * sizeof(p4n_member));
            }
            i = (int32_t)pr->nm++;
        }
        p4n_map_put(&pr->mids, mid, i);
    }
    pr->m[i].action = action;
    memcpy(pr->m[i].args, args, AMAX * sizeof(uint64_t));
}

void p4n_member_delete(void *cv, uint32_t p, uint64_t mid) {
    p4n_profile *pr = &((p4n_ctx *)cv)->profiles[p];
    int32_t i = p4n_map_get(&pr->mids, mid);
    if (i < 0) return;
    p4n_map_del(&pr->mids, mid);
    pr->mfree = realloc(pr->mfree, (pr->nmfree + 1) * sizeof(int32_t));
    pr->mfree[pr->nmfree++] = i;
}

void p4n_group_set(void *cv, uint32_t p, uint64_t gid, const uint64_t *mids, uint32_t n) {
    p4n_profile *pr = &((p4n_ctx *)cv)->profiles[p];
    int32_t i = p4n_map_get(&pr->gids, gid);
    if (i < 0) {
        if (pr->ngfree) {
            i = pr->gfree[--pr->ngfree];
        } else {
            if (pr->ng == pr->capg) {
                pr->capg = pr->capg ? pr->capg * 2 : 16;
                pr->g = realloc(pr->g, pr->capg * sizeof(p4n_group));
            }
            i = (int32_t)pr->ng++;
            pr->g[i].mids = NULL;
        }
        p4n_map_put(&pr->gids, gid, i);
    }
    free(pr->g[i].mids);
    pr->g[i].mids = malloc((n + 1) * sizeof(uint64_t));
    memcpy(pr->g[i].mids, mids, n * sizeof(uint64_t));
    pr->g[i].n = n;
}

void p4n_group_delete(void *cv, uint32_t p, uint64_t gid) {
    p4n_profile *pr = &((p4n_ctx *)cv)->profiles[p];
    int32_t i = p4n_map_get(&pr->gids, gid);
    if (i < 0) return;
    p4n_map_del(&pr->gids, gid);
    free(pr->g[i].mids);
    pr->g[i].mids = NULL;
    pr->g[i].n = 0;
    pr->gfree = realloc(pr->gfree, (pr->ngfree + 1) * sizeof(int32_t));
    pr->gfree[pr->ngfree++] = i;
}

/* counters, registers, meters */
void p4n_counter(void *cv, uint32_t i, uint32_t index, int write, uint64_t *pb) {
    p4n_ctx *c = cv;
    if (write) { c->cnt_p[i][index] = pb[0]; c->cnt_b[i][index] = pb[1]; }
    else { pb[0] = c->cnt_p[i][index]; pb[1] = c->cnt_b[i][index]; }
}

uint64_t p4n_register_read(void *cv, uint32_t r, uint32_t index) { return ((p4n_ctx *)cv)->reg[r][index]; }
void p4n_register_write(void *cv, uint32_t r, uint32_t index, uint64_t v) { ((p4n_ctx *)cv)->reg[r][index] = v; }

void p4n_meter_set(void *cv, uint32_t m, uint32_t index, int on, double cir, double cburst, double pir, double pburst) {
    p4n_meter *x = &((p4n_ctx *)cv)->met[m][index];
    x->on = on;
    x->cir = cir; x->cburst = cburst; x->pir = pir; x->pburst = pburst;
    x->tc = cburst; x->tp = pburst; x->at = p4n_meter_now(cv);
}

void p4n_set_time(void *cv, double now) { ((p4n_ctx *)cv)->fixed_now = now; }

/* packet replication engine: kind 0 multicast group, 1 clone session */
static int32_t p4n_rep_slot(p4n_ctx *c, p4n_map *m, uint64_t id) {
    int32_t i = p4n_map_get(m, id);
    if (i >= 0) return i;
    if (c->nrep == c->caprep) {
        c->caprep = c->caprep ? c->caprep * 2 : 16;
        c->rep = realloc(c->rep, c->caprep * sizeof(p4n_replicas));
    }
    i = (int32_t)c->nrep++;
    memset(&c->rep[i], 0, sizeof(p4n_replicas));
    p4n_map_put(m, id, i);
    return i;
}

void p4n_pre_set(void *cv, int kind, uint64_t id, const uint32_t *ports, const uint32_t *rids, uint32_t n, uint64_t trunc) {
    p4n_ctx *c = cv;
    int32_t i = p4n_rep_slot(c, kind ? &c->cs : &c->mc, id);
    p4n_replicas *r = &c->rep[i];
    free(r->ports); free(r->rids);
    r->ports = malloc((n + 1) * sizeof(uint32_t));
    r->rids = malloc((n + 1) * sizeof(uint32_t));
    memcpy(r->ports, ports, n * sizeof(uint32_t));
    memcpy(r->rids, rids, n * sizeof(uint32_t));
    r->n = n;
    r->trunc = trunc;
}

void p4n_pre_delete(void *cv, int kind, uint64_t id) {
    p4n_ctx *c = cv;
    p4n_map *m = kind ? &c->cs : &c->mc;
    int32_t i = p4n_map_get(m, id);
    if (i < 0) return;
    c->rep[i].n = 0; /* the slot stays allocated; an id set again reuses a new one */
    p4n_map_del(m, id);
}

/* digests: count, and pointers to the ids and the DMAX values of each record; then clear */
uint32_t p4n_digests(void *cv, const uint32_t **ids, const uint64_t **vals, uint64_t *dropped) {
    p4n_ctx *c = cv;
    *ids = c->dg_id;
    *vals = c->dg_vals;
    *dropped = c->dg_dropped;
    return c->ndg;
}
void p4n_digests_clear(void *cv) { ((p4n_ctx *)cv)->ndg = 0; }
uint32_t p4n_dmax(void) { return DMAX; }
uint32_t p4n_amax(void) { return AMAX; }
