/* _tracelens_xspace: a columnar decoder of XSpace (tsl/profiler/protobuf/xplane.proto) files.
 *
 * The per-event work of reading an XSpace is done here, in one pass over the serialized bytes,
 * and so is the per-entry work of the event metadata maps (a trace can name 100k+ kernels);
 * everything else (planes, stat metadata, stats of planes and lines, event metadata entries
 * that are not plain) is left to the protobuf runtime, which parses the small "skeleton" this
 * module returns: the file with every XLine.events entry and every plain event metadata entry
 * cut out (md_simple and plan_cuts say which entries are; none of the planes named in
 * whole_planes).
 *
 *   scan(buf, whole_planes=()) -> (skeleton: bytes,
 *                                  lines: list[(plane, line, offset, length, n_events)],
 *                                  cut: per plane, the cut event metadata (bytes) or None)
 *   event_metadata(buf, cut, stat_codes, n_codes, ref_names) -> (names, by_code) of one
 *       plane's cut entries, as parsers/xspace/planes.py reads map entries
 *   decode(buf, offset, length, timestamp_ns, stat_codes, n_codes, default_md, filter)
 *       -> dict of columns of one line's events (see py_decode below)
 *   decode_many(buf, requests, threads) -> the same for many lines, walked in parallel
 *   validate(buf, offset, length) -> number of events of a line, checking every byte
 *
 * Acceptance matches the upb decoder behind python protobuf (upb/wire/decode.c) for the bytes
 * this module reads: tags of at most 5 bytes and at most UINT32_MAX, field number 0 refused,
 * varints of at most 10 bytes, lengths below INT32_MAX and inside the enclosing message,
 * wire types 6 and 7 refused, groups closed by the matching end tag, at most 100 nested
 * messages/groups, UTF-8 checked for string fields (XStat.str_value, XEventMetadata.name and
 * display_name), a known field with an unexpected wire type kept as an unknown field. Field
 * semantics are proto3's: the last value of a singular field wins, a oneof holds the member
 * set last, repeated fields keep their order, a map keeps the last entry of a key. An event
 * metadata entry is cut only when upb would put it in the map as it is (no unknown field, one
 * value) and no other entry of its plane has its key; any other entry, and one with bytes upb
 * refuses, stays in the skeleton, for upb to read or refuse as before.
 *
 * Nothing here trusts the input: every read is bounds-checked against the enclosing message,
 * and every loop consumes at least one byte, so corrupt input is an error, never a crash or a
 * hang. Errors raise ValueError with a short description. Hostile input cannot make it slow or
 * big either: the hash maps and the string table hash with a per-process random key (crafted
 * ids cannot be made to collide), and the columns of one call may take at most
 * COLUMN_BUDGET_FACTOR bytes per input byte plus COLUMN_BUDGET_BASE (a file of empty events
 * is refused instead of growing columns many times its size); the columns are allocated once,
 * at the line's event count. Cut event metadata takes 24 bytes per entry (an entry with a key
 * of its own is at least 6 bytes of input), and plan_cuts' key set lives for one plane: less
 * than the message objects upb made of the same entries. Nor can a hostile caller: arguments
 * must be exact ints, dicts, sets and tuples, and are copied into C before anything that could
 * run Python code.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 100
#define NCODES_MAX 16
/* Ids below these are looked up by index (idmap_init_direct): event metadata ids (one per
 * distinct event name of a plane) and stat metadata ids (stat names and the strings events
 * refer to), which writers number from 1. Larger ids are hashed, as before. A line's own
 * bound is lower when it has few events (line_direct_bound). */
#define DIRECT_METADATA (1 << 15)
#define DIRECT_STATS (1 << 13)
/* Column memory of one call <= FACTOR * input bytes + BASE (parsers/xspace/native.py checks
 * the same bound for a whole file first, so both decoders refuse the same files). */
#define COLUMN_BUDGET_FACTOR 16
#define COLUMN_BUDGET_BASE (64LL << 20)

/* Per-process random hash key, drawn from os.urandom at import. */
static uint64_t g_k0 = 0x736f6d6570736575ULL, g_k1 = 0x646f72616e646f6dULL;

/* Stat value kinds, per event and stat column. */
enum { K_ABSENT = 0, K_NONE = 1, K_INT64 = 2, K_UINT64 = 3, K_DOUBLE = 4, K_STR = 5,
       K_BYTES = 6, K_REF = 7 };

/* One XStat: its metadata id, value kind and value (int bits, double bits, or a pointer to
 * the string's bytes with their length). Proto3: the value member set last wins. */
typedef struct {
    uint64_t md;
    uint8_t kind;
    int64_t val;
    uint32_t len;
} stat_t;

typedef struct {
    const char *msg;  /* first error, NULL when none */
} err_t;

static inline int fail(err_t *e, const char *msg) {
    if (!e->msg) e->msg = msg;
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Wire primitives                                                                          */
/* ---------------------------------------------------------------------------------------- */

/* Bits 7i..7i+6 of a varint from its little-endian bytes ``x`` (at most 8, the rest 0). */
static inline uint64_t varint_bits(uint64_t x) {
    return (x & 0x7fULL) | (x & 0x7f00ULL) >> 1 | (x & 0x7f0000ULL) >> 2
        | (x & 0x7f000000ULL) >> 3 | (x & 0x7f00000000ULL) >> 4
        | (x & 0x7f0000000000ULL) >> 5 | (x & 0x7f000000000000ULL) >> 6
        | (x & 0x7f00000000000000ULL) >> 7;
}

static inline int rd_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out, err_t *e) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {  /* one byte: tags, ids, lengths */
        *out = *p;
        *pp = p + 1;
        return 0;
    }
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (end - p >= 8) {  /* up to 8 bytes read as one word: no branch per byte */
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t stops = ~w & 0x8080808080808080ULL;  /* the high bit clear: the last byte */
        if (stops) {
            int n = __builtin_ctzll(stops) / 8 + 1;
            *out = varint_bits(n == 8 ? w : w & ((1ULL << (8 * n)) - 1));
            *pp = p + n;
            return 0;
        }
    }
#endif
    uint64_t v = 0;  /* 9 or 10 bytes (negative int64s), or near the end of the buffer */
    for (int i = 0; i < 10; i++) {
        if (p >= end) return fail(e, "truncated varint");
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << (7 * i);  /* bits past 64 are dropped, as upb does */
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return fail(e, "varint longer than 10 bytes");
}

static inline int rd_tag(const uint8_t **pp, const uint8_t *end, uint32_t *field, int *wt,
                         err_t *e) {
    const uint8_t *p = *pp;
    if (p < end && !(*p & 0x80)) {
        *field = *p >> 3;
        *wt = *p & 7;
        *pp = p + 1;
        return 0;
    }
    uint64_t v;
    if (rd_varint(&p, end, &v, e)) return -1;
    if (p - *pp > 5 || v > 0xffffffffu) return fail(e, "malformed tag");
    *field = (uint32_t)(v >> 3);
    *wt = (int)(v & 7);
    *pp = p;
    return 0;
}

static inline int rd_len(const uint8_t **pp, const uint8_t *end, uint64_t *len, err_t *e) {
    uint64_t v;
    if (rd_varint(pp, end, &v, e)) return -1;
    if (v >= 0x7fffffffu) return fail(e, "length too large");
    if (v > (uint64_t)(end - *pp)) return fail(e, "length past the end of its message");
    *len = v;
    return 0;
}

static int skip_group(const uint8_t **pp, const uint8_t *end, uint32_t number, int depth,
                      err_t *e);

/* Skip the value of one field whose tag was just read (not an end-group tag). */
static int skip_value(const uint8_t **pp, const uint8_t *end, uint32_t field, int wt,
                      int depth, err_t *e) {
    uint64_t v;
    if (field == 0) return fail(e, "field number 0");
    switch (wt) {
        case 0:
            return rd_varint(pp, end, &v, e);
        case 1:
            if (end - *pp < 8) return fail(e, "truncated fixed64");
            *pp += 8;
            return 0;
        case 2:
            if (rd_len(pp, end, &v, e)) return -1;
            *pp += v;
            return 0;
        case 3:
            return skip_group(pp, end, field, depth + 1, e);
        case 5:
            if (end - *pp < 4) return fail(e, "truncated fixed32");
            *pp += 4;
            return 0;
        default:
            return fail(e, "invalid wire type");
    }
}

/* An unknown group: fields until the end-group tag of the same number. ``depth`` is the
 * group's own nesting level. */
static int skip_group(const uint8_t **pp, const uint8_t *end, uint32_t number, int depth,
                      err_t *e) {
    if (*pp >= end) return fail(e, "group at end of message");
    if (depth > MAX_DEPTH) return fail(e, "nesting too deep");
    while (*pp < end) {
        uint32_t f;
        int wt;
        if (rd_tag(pp, end, &f, &wt, e)) return -1;
        if (wt == 4) {
            if (f != number) return fail(e, "mismatched end-group tag");
            return 0;
        }
        if (skip_value(pp, end, f, wt, depth, e)) return -1;
    }
    return fail(e, "unterminated group");
}

/* One field of a length-delimited message at nesting ``depth``: an end-group tag is an error
 * there (it would close a group that is not open). */
static inline int skip_field(const uint8_t **pp, const uint8_t *end, uint32_t f, int wt,
                             int depth, err_t *e) {
    if (wt == 4) return fail(e, "unexpected end-group tag");
    return skip_value(pp, end, f, wt, depth, e);
}

/* ---------------------------------------------------------------------------------------- */
/* UTF-8 (the strict definition upb uses: no overlongs, surrogates or code points > 10FFFF)  */
/* ---------------------------------------------------------------------------------------- */

static int utf8_ok(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= k) return 0;
        for (size_t j = 1; j <= k; j++) {
            uint8_t d = s[i + j];
            if ((d & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (d & 0x3f);
        }
        if (k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) return 0;
        if (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) return 0;
        i += k + 1;
    }
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Growable byte buffer (the skeleton)                                                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    uint8_t *data;
    size_t len, cap;
} buf_t;

static int buf_put(buf_t *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        uint8_t *d = realloc(b->data, cap);
        if (!d) return -1;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

static int buf_varint(buf_t *b, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    do {
        tmp[n] = v & 0x7f;
        v >>= 7;
        if (v) tmp[n] |= 0x80;
        n++;
    } while (v);
    return buf_put(b, tmp, n);
}

/* ---------------------------------------------------------------------------------------- */
/* Hash maps: uint64 key -> dense index (first-seen order)                                  */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    uint64_t *keys;
    int32_t *vals;    /* dense index, -1 = empty slot */
    size_t cap;       /* power of two */
    size_t n;         /* entries, hashed and direct */
    size_t hashed;    /* entries in keys/vals (what the load factor counts) */
    int32_t *direct;  /* keys below dmax: dense index by key (grown to dcap as keys come),
                       * -1 = absent; no hashing */
    size_t dcap, dmax;
    uint64_t *order;  /* dense index -> key */
    int64_t *counts;  /* per dense index: a counter the caller uses */
    uint8_t *flag;    /* per dense index: a flag the caller sets */
    size_t order_cap;
} idmap_t;

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* The map's slot hash of a key: the finalizer above on the key mixed with the secret key,
 * so which ids collide cannot be known from outside the process. */
static inline uint64_t hkey(uint64_t x) {
    return mix64(mix64(x ^ g_k0) + g_k1);
}

static int idmap_init(idmap_t *m, size_t cap) {
    memset(m, 0, sizeof(*m));
    m->cap = cap;
    m->keys = malloc(cap * sizeof(uint64_t));
    m->vals = malloc(cap * sizeof(int32_t));
    if (!m->keys || !m->vals) return -1;
    memset(m->vals, 0xff, cap * sizeof(int32_t));
    return 0;
}

/* idmap_init, and keys below ``dmax`` looked up by index instead of hashed: the metadata
 * and stat ids an XSpace writer numbers from 1, read once per event or stat (a hash of two
 * multiply rounds and a probe each: about a fifth of the line walk's samples). The index
 * grows with the largest such key added, so a line of a few names holds a small one. */
static int idmap_init_direct(idmap_t *m, size_t cap, size_t dmax) {
    if (idmap_init(m, cap)) return -1;
    m->dmax = dmax;
    return 0;
}

/* A line's maps are sized by its event count, so that what a line holds grows with its
 * events, as its columns do (the column budget bounds those): all of a plane's lines are
 * decoded at once, and a hostile file of many one-event lines naming ids near the bounds
 * held ~190 kB a line otherwise (20k such lines, 0.9 MB, took 4.2 GB). The hash tables start
 * at about twice the events (16 to ``cap`` slots) and grow as they fill; ids are indexed below
 * 64 + 4 per event (at most ``limit``), larger ones hashed. */
static size_t line_start_cap(size_t cap, Py_ssize_t events) {
    size_t c = 16;
    while (c < cap && c < 2 * (size_t)events) c *= 2;
    return c;
}

static size_t line_direct_bound(size_t limit, Py_ssize_t events) {
    size_t near = 64 + 4 * (size_t)events;
    return near < limit ? near : limit;
}

/* The index grown past ``key`` (< dmax): a power of two, the new slots absent. */
static int idmap_grow_direct(idmap_t *m, uint64_t key) {
    size_t cap = m->dcap ? m->dcap : 64;
    while (cap <= key) cap *= 2;
    int32_t *d = realloc(m->direct, cap * sizeof(int32_t));
    if (!d) return -1;
    memset(d + m->dcap, 0xff, (cap - m->dcap) * sizeof(int32_t));
    m->direct = d;
    m->dcap = cap;
    return 0;
}

static void idmap_free(idmap_t *m) {
    free(m->keys);
    free(m->vals);
    free(m->direct);
    free(m->order);
    free(m->counts);
    free(m->flag);
    memset(m, 0, sizeof(*m));
}

static int idmap_grow(idmap_t *m) {
    size_t cap = m->cap * 2;
    uint64_t *keys = malloc(cap * sizeof(uint64_t));
    int32_t *vals = malloc(cap * sizeof(int32_t));
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    memset(vals, 0xff, cap * sizeof(int32_t));
    for (size_t i = 0; i < m->cap; i++) {
        if (m->vals[i] < 0) continue;
        size_t j = hkey(m->keys[i]) & (cap - 1);
        while (vals[j] >= 0) j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

/* The next dense index, for ``key`` (its order, counter and flag); -1 on out of memory. */
static int32_t idmap_append(idmap_t *m, uint64_t key) {
    if (m->n >= 0x7ffffff0) return -1;
    if (m->n == m->order_cap) {
        size_t oc = m->order_cap ? m->order_cap * 2 : 64;
        uint64_t *o = realloc(m->order, oc * sizeof(uint64_t));
        if (!o) return -1;
        m->order = o;
        int64_t *c = realloc(m->counts, oc * sizeof(int64_t));
        if (!c) return -1;
        m->counts = c;
        uint8_t *fl = realloc(m->flag, oc);
        if (!fl) return -1;
        m->flag = fl;
        m->order_cap = oc;
    }
    int32_t idx = (int32_t)m->n++;
    m->order[idx] = key;
    m->counts[idx] = 0;
    m->flag[idx] = 0;
    return idx;
}

/* Dense index of ``key``; *is_new says whether it was just added. -1 on out of memory. */
static inline int32_t idmap_get(idmap_t *m, uint64_t key, int *is_new) {
    if (key < m->dmax) {
        if (key >= m->dcap && idmap_grow_direct(m, key)) return -1;
        int32_t v = m->direct[key];
        *is_new = v < 0;
        if (v < 0) {
            v = idmap_append(m, key);
            if (v >= 0) m->direct[key] = v;
        }
        return v;
    }
    size_t j = hkey(key) & (m->cap - 1);
    while (m->vals[j] >= 0) {
        if (m->keys[j] == key) {
            *is_new = 0;
            return m->vals[j];
        }
        j = (j + 1) & (m->cap - 1);
    }
    int32_t idx = idmap_append(m, key);
    if (idx < 0) return -1;
    m->keys[j] = key;
    m->vals[j] = idx;
    m->hashed++;
    *is_new = 1;
    if (m->hashed * 2 > m->cap && idmap_grow(m)) return -1;
    return idx;
}

/* Lookup only: -1 when absent. */
static inline int32_t idmap_find(const idmap_t *m, uint64_t key) {
    if (key < m->dmax) return key < m->dcap ? m->direct[key] : -1;  /* never added: absent */
    size_t j = hkey(key) & (m->cap - 1);
    while (m->vals[j] >= 0) {
        if (m->keys[j] == key) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Event metadata: the map entries scan cuts out of the skeleton                            */
/* ---------------------------------------------------------------------------------------- */

/* An XPlane.event_metadata map entry is a message of key 1 (int64) and value 2
 * (XEventMetadata: id 1 int64, name 2 string, metadata 3 bytes, display_name 4 string,
 * stats 5 repeated XStat, child_id 6 repeated int64). Each entry the protobuf runtime parses
 * becomes a message object, and PlaneReader visits every one from Python: with 100k+ kernel
 * names, the largest cost of reading a file. So scan cuts the entries whose meaning is plain
 * (md_simple below) out of the skeleton, and event_metadata turns them into the dicts
 * PlaneReader builds, in C. Anything else stays in the skeleton, for upb. */

/* Per column code, the last value of a stat of one event metadata (see md_simple). */
typedef struct {
    const idmap_t *codes;     /* stat metadata id -> dense index */
    const int32_t *code_of;   /* dense index -> column code */
    stat_t last[NCODES_MAX];
    uint8_t set[NCODES_MAX];
} md_stats_t;

/* One XStat of an event metadata scan may cut (at nesting ``depth``): only the fields the
 * schema declares, each with its own wire type (metadata_id 1, uint64 3, int64 4, ref 7:
 * varint; double 2: fixed64; str 5: valid UTF-8; bytes 6). 1 with *st filled (proto3: the
 * last metadata id and the last value member win; no value: K_NONE); 0 for a stat upb reads
 * but with something else (unknown fields, other wire types); -1 for bytes upb refuses. */
static int stat_simple(const uint8_t *p, const uint8_t *end, int depth, stat_t *st) {
    err_t e = {0};
    uint64_t v;
    int simple = 1;
    st->md = 0;
    st->kind = K_NONE;
    st->val = 0;
    st->len = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &e)) return -1;
        if (wt == 0 && (f == 1 || f == 3 || f == 4 || f == 7)) {
            if (rd_varint(&p, end, &v, &e)) return -1;
            if (f == 1) {
                st->md = v;
            } else {
                st->kind = f == 3 ? K_UINT64 : f == 4 ? K_INT64 : K_REF;
                st->val = (int64_t)v;
            }
        } else if (wt == 1 && f == 2) {
            if (end - p < 8) return -1;
            uint64_t bits;
            memcpy(&bits, p, 8);
            p += 8;
            st->kind = K_DOUBLE;
            st->val = (int64_t)bits;
        } else if (wt == 2 && (f == 5 || f == 6)) {
            uint64_t len;
            if (rd_len(&p, end, &len, &e)) return -1;
            if (f == 5 && !utf8_ok(p, len)) return -1;
            st->kind = f == 5 ? K_STR : K_BYTES;
            st->val = (int64_t)(intptr_t)p;
            st->len = (uint32_t)len;
            p += len;
        } else {
            if (skip_field(&p, end, f, wt, depth, &e)) return -1;
            simple = 0;
        }
    }
    return simple;
}

/* An XEventMetadata body scan may cut (at nesting ``depth``): only id 1 (varint), name 2 and
 * display_name 4 (valid UTF-8: proto3 strings), metadata 3 (bytes) and stats 5 (each one
 * stat_simple takes), any number of times. 1 with the last name (proto3; none: empty) and,
 * with ``stats``, the last value of each wanted stat; 0 for a message upb reads but with
 * something else (child_id 6, unknown fields, other wire types); -1 for bytes upb refuses. */
static int md_simple(const uint8_t *p, const uint8_t *end, int depth, const uint8_t **name,
                     uint32_t *name_len, md_stats_t *stats) {
    err_t e = {0};
    uint64_t v;
    int simple = 1;
    *name = p;
    *name_len = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &e)) return -1;
        if (f == 1 && wt == 0) {
            if (rd_varint(&p, end, &v, &e)) return -1;
        } else if (wt == 2 && f >= 2 && f <= 5) {
            uint64_t len;
            if (rd_len(&p, end, &len, &e)) return -1;
            if ((f == 2 || f == 4) && !utf8_ok(p, len)) return -1;
            if (f == 2) {
                *name = p;
                *name_len = (uint32_t)len;
            } else if (f == 5) {
                stat_t st;
                if (depth + 1 > MAX_DEPTH) return -1;
                int rc = stat_simple(p, p + len, depth + 1, &st);
                if (rc < 0) return -1;
                simple &= rc;
                int32_t ci = stats && rc ? idmap_find(stats->codes, st.md) : -1;
                if (ci >= 0) {
                    int c = stats->code_of[ci];
                    stats->last[c] = st;
                    stats->set[c] = 1;
                }
            }
            p += len;
        } else {
            if (skip_field(&p, end, f, wt, depth, &e)) return -1;
            simple = 0;
        }
    }
    return simple;
}

/* One event_metadata map entry (at nesting 2): its key as upb reads it (the last varint of
 * field 1; none: 0) and whether scan may cut it: at most one key, exactly one value, nothing
 * else (upb merges repeated values, and drops an entry with unknown fields from the map), and
 * a value md_simple takes. -1 when the key cannot be told for sure (a field 1 of another wire
 * type) or the entry has bytes upb refuses: then nothing of the plane is cut, so upb reads
 * (and refuses) the plane's bytes as before. */
static int entry_read(const uint8_t *p, const uint8_t *end, uint64_t *key,
                      const uint8_t **val, uint64_t *val_len, int *simple) {
    err_t e = {0};
    int n_key = 0, n_val = 0, other = 0;
    *key = 0;
    *val = p;
    *val_len = 0;
    *simple = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &e)) return -1;
        if (f == 1) {
            if (wt != 0 || rd_varint(&p, end, key, &e)) return -1;
            n_key++;
        } else if (f == 2 && wt == 2) {
            uint64_t len;
            const uint8_t *name;
            uint32_t name_len;
            if (rd_len(&p, end, &len, &e)) return -1;
            int rc = md_simple(p, p + len, 3, &name, &name_len, NULL);
            if (rc < 0) return -1;
            *val = p;
            *val_len = len;
            *simple = rc;
            p += len;
            n_val++;
        } else {
            if (skip_field(&p, end, f, wt, 2, &e)) return -1;
            other = 1;
        }
    }
    *simple = *simple && n_key <= 1 && n_val == 1 && !other;
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* scan: the skeleton and where each line's events are                                      */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    PyObject *lines;  /* list of tuples */
    PyObject *cut;    /* per plane: bytes of the cut entries' (key, offset, length), or None */
    PyObject *whole;  /* tuple of bytes: names of the planes whose event metadata is not cut */
    err_t err;
    int oom;
} scan_t;

/* Copy one XLine without its events into ``out``; count its events. */
static int scan_line(scan_t *s, const uint8_t *p, const uint8_t *end, buf_t *out,
                     Py_ssize_t *n_events) {
    Py_ssize_t n = 0;
    while (p < end) {
        const uint8_t *start = p;
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &s->err)) return -1;
        if (f == 4 && wt == 2) {
            uint64_t len;
            if (rd_len(&p, end, &len, &s->err)) return -1;
            p += len;
            n++;
            continue;
        }
        if (skip_field(&p, end, f, wt, 2, &s->err)) return -1;
        if (buf_put(out, start, p - start)) return s->oom = 1, -1;
    }
    *n_events = n;
    return 0;
}

/* Which event_metadata entries of one XPlane body scan cuts: one byte per entry in ``flags``
 * (1: cut), and the key, value offset (in ``base``) and value length of each cut entry as
 * int64 in ``table``. Nothing is cut (both left empty) in a plane named in s->whole, nor when
 * two entries have the same key or some key cannot be told for sure: a map keeps the last
 * entry of a key and upb drops an entry with unknown fields, so which of them ends in the map
 * would depend on the order of cut and kept entries; upb then reads the whole map as before.
 * Nor when some entry has bytes upb refuses, or the plane bad framing (which the walk that
 * follows reports): upb then meets the same bytes as before, and says the same about them
 * (what it says of a bad length can depend on the bytes after it). -1 on out of memory. */
static int plan_cuts(scan_t *s, const uint8_t *base, const uint8_t *p, const uint8_t *end,
                     buf_t *flags, buf_t *table) {
    err_t e = {0};
    idmap_t keys = {0};
    const uint8_t *name = p;
    uint64_t name_len = 0;
    int ok = 1, rc = -1;
    flags->len = table->len = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &e)) {
            ok = 0;
            break;
        }
        if (wt == 2 && (f == 2 || f == 4)) {
            uint64_t len;
            if (rd_len(&p, end, &len, &e)) {
                ok = 0;
                break;
            }
            const uint8_t *body = p;
            p += len;
            if (f == 2) {  /* the plane's name: the last one wins */
                name = body;
                name_len = len;
                continue;
            }
            uint64_t key, val_len;
            const uint8_t *val;
            int simple, is_new;
            if (entry_read(body, p, &key, &val, &val_len, &simple)) {
                ok = 0;
                break;
            }
            if (!keys.cap && idmap_init(&keys, 64)) goto done;
            if (idmap_get(&keys, key, &is_new) < 0) goto done;
            if (!is_new) {
                ok = 0;
                break;
            }
            uint8_t flag = (uint8_t)simple;
            int64_t rec[3] = {(int64_t)key, (int64_t)(val - base), (int64_t)val_len};
            if (buf_put(flags, &flag, 1) || (simple && buf_put(table, rec, sizeof(rec))))
                goto done;
            continue;
        }
        if (skip_field(&p, end, f, wt, 1, &e)) {
            ok = 0;
            break;
        }
    }
    for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(s->whole); i++) {
        PyObject *w = PyTuple_GET_ITEM(s->whole, i);
        if ((uint64_t)PyBytes_GET_SIZE(w) == name_len &&
            memcmp(PyBytes_AS_STRING(w), name, name_len) == 0)
            ok = 0;
    }
    if (!ok || !table->len) flags->len = table->len = 0;
    rc = 0;
done:
    if (rc) s->oom = 1;
    idmap_free(&keys);
    return rc;
}

static int scan_plane(scan_t *s, const uint8_t *base, const uint8_t *p, const uint8_t *end,
                      Py_ssize_t plane_idx, buf_t *out, buf_t *flags, buf_t *table) {
    Py_ssize_t line_idx = 0, n_md = 0;
    buf_t line = {0};
    int rc = -1;
    if (plan_cuts(s, base, p, end, flags, table)) return -1;
    while (p < end) {
        const uint8_t *start = p;
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &s->err)) goto done;
        if (f == 4 && wt == 2 && n_md < (Py_ssize_t)flags->len && flags->data[n_md++]) {
            uint64_t len;  /* an event metadata entry cut out (see plan_cuts) */
            if (rd_len(&p, end, &len, &s->err)) goto done;
            p += len;
            continue;
        }
        if (f == 3 && wt == 2) {
            uint64_t len;
            if (rd_len(&p, end, &len, &s->err)) goto done;
            Py_ssize_t n_events = 0;
            line.len = 0;
            if (scan_line(s, p, p + len, &line, &n_events)) goto done;
            PyObject *t = Py_BuildValue("(nnnnn)", plane_idx, line_idx, (Py_ssize_t)(p - base),
                                        (Py_ssize_t)len, n_events);
            if (!t || PyList_Append(s->lines, t)) {
                Py_XDECREF(t);
                s->oom = 1;
                goto done;
            }
            Py_DECREF(t);
            uint8_t tagbyte = (3 << 3) | 2;
            if (buf_put(out, &tagbyte, 1) || buf_varint(out, line.len) ||
                (line.len && buf_put(out, line.data, line.len))) {
                s->oom = 1;
                goto done;
            }
            p += len;
            line_idx++;
            continue;
        }
        if (skip_field(&p, end, f, wt, 1, &s->err)) goto done;
        if (buf_put(out, start, p - start)) {
            s->oom = 1;
            goto done;
        }
    }
    rc = 0;
done:
    free(line.data);
    return rc;
}

/* scan(buf, whole_planes=()) -> (skeleton, lines, cut)
 *
 * skeleton: the XSpace without its XLine.events entries, and without the event metadata map
 * entries plan_cuts picks (none in the planes whose names whole_planes, a tuple of bytes,
 * holds); lines: (plane, line, offset, length, n_events) of every line; cut: per plane, the
 * (key, offset, length) int64 triples of its cut entries' XEventMetadata (read them with
 * event_metadata), or None. */
static PyObject *py_scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *whole = NULL;
    if (!PyArg_ParseTuple(args, "y*|O", &view, &whole)) return NULL;
    const uint8_t *base = view.buf, *p = base, *end = base + view.len;
    scan_t s = {0};
    buf_t out = {0}, plane = {0}, flags = {0}, table = {0};
    PyObject *result = NULL;
    if (whole && !PyTuple_CheckExact(whole)) {
        PyErr_SetString(PyExc_TypeError, "whole_planes must be a tuple of bytes");
        goto done;
    }
    for (Py_ssize_t i = 0; whole && i < PyTuple_GET_SIZE(whole); i++) {
        if (!PyBytes_CheckExact(PyTuple_GET_ITEM(whole, i))) {
            PyErr_SetString(PyExc_TypeError, "whole_planes must be a tuple of bytes");
            goto done;
        }
    }
    s.whole = whole ? (Py_INCREF(whole), whole) : PyTuple_New(0);
    s.lines = PyList_New(0);
    s.cut = PyList_New(0);
    if (!s.whole || !s.lines || !s.cut) goto done;
    Py_ssize_t plane_idx = 0;
    while (p < end) {
        const uint8_t *start = p;
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &s.err)) break;
        if (f == 1 && wt == 2) {
            uint64_t len;
            if (rd_len(&p, end, &len, &s.err)) break;
            plane.len = 0;
            if (scan_plane(&s, base, p, p + len, plane_idx, &plane, &flags, &table)) break;
            uint8_t tagbyte = (1 << 3) | 2;
            if (buf_put(&out, &tagbyte, 1) || buf_varint(&out, plane.len) ||
                (plane.len && buf_put(&out, plane.data, plane.len))) {
                s.oom = 1;
                break;
            }
            PyObject *cut = table.len ? PyBytes_FromStringAndSize((const char *)table.data,
                                                                  (Py_ssize_t)table.len)
                                      : (Py_INCREF(Py_None), Py_None);
            if (!cut || PyList_Append(s.cut, cut)) {
                Py_XDECREF(cut);
                s.oom = 1;
                break;
            }
            Py_DECREF(cut);
            p += len;
            plane_idx++;
            continue;
        }
        if (skip_field(&p, end, f, wt, 0, &s.err)) break;
        if (buf_put(&out, start, p - start)) {
            s.oom = 1;
            break;
        }
    }
    if (s.oom) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    if (s.err.msg) {
        PyErr_Format(PyExc_ValueError, "%s", s.err.msg);
        goto done;
    }
    PyObject *skel = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.len);
    if (!skel) goto done;
    result = Py_BuildValue("(NOO)", skel, s.lines, s.cut);
done:
    free(out.data);
    free(plane.data);
    free(flags.data);
    free(table.data);
    Py_XDECREF(s.lines);
    Py_XDECREF(s.cut);
    Py_XDECREF(s.whole);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------------------------------- */
/* String table: inline str/bytes stat values, deduplicated per decode call                 */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    const uint8_t **ptr;
    uint32_t *len;
    uint8_t *kind;
    int32_t *slots;  /* hash slots -> index, -1 empty */
    size_t cap, n, items_cap;
} strtab_t;

/* SipHash-1-3 (Aumasson and Bernstein) of the bytes and their kind, keyed with the process
 * key: a keyed hash, so crafted strings cannot be made to collide. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                          \
    do {                                                                                  \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                         \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                            \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                            \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                         \
    } while (0)

static uint64_t hash_bytes(const uint8_t *s, size_t n, uint8_t kind) {
    uint64_t v0 = g_k0 ^ 0x736f6d6570736575ULL, v1 = (g_k1 ^ kind) ^ 0x646f72616e646f6dULL,
             v2 = g_k0 ^ 0x6c7967656e657261ULL, v3 = g_k1 ^ 0x7465646279746573ULL;
    uint64_t m;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&m, s + i, 8);
        v3 ^= m;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t last = (uint64_t)(n & 0xff) << 56;
    for (size_t k = 0; i + k < n; k++) last |= (uint64_t)s[i + k] << (8 * k);
    v3 ^= last;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static int strtab_init(strtab_t *t) {
    memset(t, 0, sizeof(*t));
    t->cap = 64;
    t->slots = malloc(t->cap * sizeof(int32_t));
    if (!t->slots) return -1;
    memset(t->slots, 0xff, t->cap * sizeof(int32_t));
    return 0;
}

static void strtab_free(strtab_t *t) {
    free(t->ptr);
    free(t->len);
    free(t->kind);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

static int32_t strtab_get(strtab_t *t, const uint8_t *s, uint32_t n, uint8_t kind) {
    uint64_t h = hash_bytes(s, n, kind);
    size_t j = h & (t->cap - 1);
    while (t->slots[j] >= 0) {
        int32_t k = t->slots[j];
        if (t->kind[k] == kind && t->len[k] == n && memcmp(t->ptr[k], s, n) == 0) return k;
        j = (j + 1) & (t->cap - 1);
    }
    if (t->n >= 0x7ffffff0) return -1;
    if (t->n == t->items_cap) {
        size_t c = t->items_cap ? t->items_cap * 2 : 64;
        const uint8_t **p = realloc(t->ptr, c * sizeof(*p));
        if (!p) return -1;
        t->ptr = p;
        uint32_t *l = realloc(t->len, c * sizeof(uint32_t));
        if (!l) return -1;
        t->len = l;
        uint8_t *k = realloc(t->kind, c);
        if (!k) return -1;
        t->kind = k;
        t->items_cap = c;
    }
    int32_t idx = (int32_t)t->n++;
    t->ptr[idx] = s;
    t->len[idx] = n;
    t->kind[idx] = kind;
    t->slots[j] = idx;
    if (t->n * 2 > t->cap) {
        size_t cap = t->cap * 2;
        int32_t *slots = malloc(cap * sizeof(int32_t));
        if (!slots) return -1;
        memset(slots, 0xff, cap * sizeof(int32_t));
        for (size_t i = 0; i < t->n; i++) {
            size_t q = hash_bytes(t->ptr[i], t->len[i], t->kind[i]) & (cap - 1);
            while (slots[q] >= 0) q = (q + 1) & (cap - 1);
            slots[q] = (int32_t)i;
        }
        free(t->slots);
        t->slots = slots;
        t->cap = cap;
    }
    return idx;
}

/* ---------------------------------------------------------------------------------------- */
/* decode: one line's events as columns                                                     */
/* ---------------------------------------------------------------------------------------- */

typedef struct {
    int ncodes;
    idmap_t stat_codes;   /* stat metadata id -> column code (dense index = position) */
    int32_t *code_of;     /* dense index of stat_codes -> column code */
    idmap_t md;           /* event metadata ids seen (counts: non-negative events) */
    idmap_t refs;         /* ref values seen */
    strtab_t strs;
    idmap_t defaults;     /* metadata ids whose events carry default stats (filter mode) */
    int filter;
    /* outputs */
    Py_ssize_t cap, n;
    int32_t *md_code;
    int64_t *start_ns, *end_ns;
    uint8_t *kinds[NCODES_MAX];
    uint32_t kind_mask[NCODES_MAX]; /* per stat column, bit k set when a row has kind k */
    int64_t *vals[NCODES_MAX];
    int64_t negative;
    err_t err;
    int oom;
} dec_t;

/* The output columns for ``cap`` rows, allocated once (the line's event count is known before
 * the walk); a stat column's values are allocated when the first value arrives. */
static int alloc_outputs(dec_t *d, Py_ssize_t cap) {
    size_t rows = cap ? (size_t)cap : 1;
    d->md_code = malloc(rows * sizeof(int32_t));
    d->start_ns = malloc(rows * sizeof(int64_t));
    d->end_ns = malloc(rows * sizeof(int64_t));
    if (!d->md_code || !d->start_ns || !d->end_ns) return -1;
    for (int c = 0; c < d->ncodes; c++)
        if (!(d->kinds[c] = malloc(rows))) return -1;
    d->cap = cap;
    return 0;
}

/* Bytes of columns ``rows`` rows may take (every stat column with values). */
static inline long long column_bytes(long long rows, int ncodes) {
    return rows * (4 + 8 + 8 + 9LL * ncodes);
}

static inline int64_t floordiv1000(__int128 x) {
    __int128 q = x / 1000;
    if ((x % 1000) != 0 && x < 0) q -= 1;
    return (int64_t)q;  /* range checked by the caller */
}

static inline int64_t floordiv1000_64(int64_t x) {  /* floordiv1000 of an int64 */
    return x / 1000 - (x % 1000 != 0 && x < 0);
}

/* An event's start and end in ns: the line's ``ts_ns`` plus its offset and offset +
 * duration in ps, floored to ns. 0, or 1 when either is outside int64. In int64 arithmetic
 * (a division by the constant 1000 is a multiply) unless offset + duration overflows it;
 * then in 128 bits (a library division). Either way the same values. */
static inline int event_times(int64_t ts_ns, int64_t off, int64_t dur, int64_t *start,
                              int64_t *stop) {
    int64_t end_ps;
    if (!__builtin_add_overflow(off, dur, &end_ps))
        return __builtin_add_overflow(ts_ns, floordiv1000_64(off), start) ||
               __builtin_add_overflow(ts_ns, floordiv1000_64(end_ps), stop);
    __int128 s = (__int128)off;
    __int128 e = s + (__int128)dur;
    __int128 a = (__int128)ts_ns + floordiv1000(s);
    __int128 b = (__int128)ts_ns + floordiv1000(e);
    if (a > INT64_MAX || a < INT64_MIN || b > INT64_MAX || b < INT64_MIN) return 1;
    *start = (int64_t)a;
    *stop = (int64_t)b;
    return 0;
}

/* Does the event with dense metadata index ``mdi`` carry default stats (filter mode)? */
static inline int md_has_default(dec_t *d, int32_t mdi, int is_new) {
    if (is_new) d->md.flag[mdi] = idmap_find(&d->defaults, d->md.order[mdi]) >= 0;
    return d->md.flag[mdi];
}

static int read_stat(dec_t *d, const uint8_t *p, const uint8_t *end, int depth, stat_t *st) {
    uint64_t v;
    st->md = 0;
    st->kind = K_NONE;
    st->val = 0;
    st->len = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &d->err)) return -1;
        if (wt == 0 && (f == 1 || f == 3 || f == 4 || f == 7)) {
            if (rd_varint(&p, end, &v, &d->err)) return -1;
            if (f == 1) {
                st->md = v;
            } else {
                st->kind = f == 3 ? K_UINT64 : f == 4 ? K_INT64 : K_REF;
                st->val = (int64_t)v;
            }
        } else if (wt == 1 && f == 2) {
            if (end - p < 8) return fail(&d->err, "truncated fixed64");
            uint64_t bits;
            memcpy(&bits, p, 8);
            p += 8;
            st->kind = K_DOUBLE;
            st->val = (int64_t)bits;
        } else if (wt == 2 && (f == 5 || f == 6)) {
            uint64_t len;
            if (rd_len(&p, end, &len, &d->err)) return -1;
            if (f == 5 && !utf8_ok(p, len)) return fail(&d->err, "string field had bad UTF-8");
            st->kind = f == 5 ? K_STR : K_BYTES;
            st->val = (int64_t)(intptr_t)p;
            st->len = (uint32_t)len;
            p += len;
        } else {
            if (skip_field(&p, end, f, wt, depth, &d->err)) return -1;
        }
    }
    return 0;
}

/* The fields of one XEvent as read from the wire (wanted stats by column code). */
typedef struct {
    uint64_t md_id, off, dur;
    uint8_t kind[NCODES_MAX];
    int64_t val[NCODES_MAX];
    uint32_t slen[NCODES_MAX];
    int any;  /* a wanted stat is present */
} event_t;

/* Parse one XEvent at nesting ``depth`` (3 inside a line); with ``emit`` 0, only check it. */
static int read_event(dec_t *d, const uint8_t *p, const uint8_t *end, int depth, int emit,
                      event_t *ev) {
    uint64_t v;
    int have_offset = 0;
    ev->md_id = ev->off = ev->dur = 0;
    ev->any = 0;
    for (int c = 0; c < d->ncodes; c++) ev->kind[c] = K_ABSENT;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &d->err)) return -1;
        if (wt == 0 && (f == 1 || f == 2 || f == 3 || f == 5)) {
            if (rd_varint(&p, end, &v, &d->err)) return -1;
            if (f == 1) ev->md_id = v;
            else if (f == 2) { ev->off = v; have_offset = 1; }
            else if (f == 3) ev->dur = v;
            else have_offset = 0;  /* num_occurrences takes the oneof */
        } else if (wt == 2 && f == 4) {
            uint64_t len;
            if (rd_len(&p, end, &len, &d->err)) return -1;
            if (depth + 1 > MAX_DEPTH) return fail(&d->err, "nesting too deep");
            stat_t st;
            if (read_stat(d, p, p + len, depth + 1, &st)) return -1;
            p += len;
            if (emit) {
                int32_t ci = idmap_find(&d->stat_codes, st.md);
                if (ci >= 0) {
                    int c = d->code_of[ci];
                    ev->kind[c] = st.kind;
                    ev->val[c] = st.val;
                    ev->slen[c] = st.len;
                    ev->any = 1;
                }
            }
        } else {
            if (skip_field(&p, end, f, wt, depth, &d->err)) return -1;
        }
    }
    if (!have_offset) ev->off = 0;
    return 0;
}

/* Append one parsed event to the columns (or count it as dropped / filtered out). */
static int emit_event(dec_t *d, const event_t *ev, int64_t ts_ns) {
    if ((int64_t)ev->dur < 0) {
        d->negative++;
        return 0;
    }
    int is_new;
    int32_t mdi = idmap_get(&d->md, ev->md_id, &is_new);
    if (mdi < 0) return d->oom = 1, -1;
    d->md.counts[mdi]++;
    int has_default = md_has_default(d, mdi, is_new);
    /* every event not dropped is checked, filtered or not: the per-event reader does so */
    int64_t start, stop;
    if (event_times(ts_ns, (int64_t)ev->off, (int64_t)ev->dur, &start, &stop))
        return fail(&d->err, "event time out of the int64 nanosecond range");
    if (d->filter && !ev->any && !has_default) return 0;
    if (d->n >= d->cap) return fail(&d->err, "more events than counted");  /* cannot happen */
    Py_ssize_t i = d->n++;
    d->md_code[i] = mdi;
    d->start_ns[i] = (int64_t)start;
    d->end_ns[i] = (int64_t)stop;
    for (int c = 0; c < d->ncodes; c++) {
        uint8_t k = ev->kind[c];
        d->kinds[c][i] = k;
        d->kind_mask[c] |= 1u << (k & 31);
        if (k == K_ABSENT || k == K_NONE) {
            if (d->vals[c]) d->vals[c][i] = 0;
            continue;
        }
        if (!d->vals[c]) {
            d->vals[c] = calloc(d->cap ? d->cap : 1, sizeof(int64_t));
            if (!d->vals[c]) return d->oom = 1, -1;
        }
        int64_t out = ev->val[c];
        if (k == K_STR || k == K_BYTES) {
            int32_t si = strtab_get(&d->strs, (const uint8_t *)(intptr_t)ev->val[c],
                                    ev->slen[c], k);
            if (si < 0) return d->oom = 1, -1;
            out = si;
        } else if (k == K_REF) {
            int nw;
            int32_t ri = idmap_get(&d->refs, (uint64_t)ev->val[c], &nw);
            if (ri < 0) return d->oom = 1, -1;
            out = ri;
        }
        d->vals[c][i] = out;
    }
    return 0;
}

/* The events entries of one XLine body, counted without reading them (-1 on bad framing). */
static Py_ssize_t count_events(const uint8_t *p, const uint8_t *end, err_t *err) {
    Py_ssize_t n = 0;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, err)) return -1;
        if (f == 4 && wt == 2) {
            uint64_t len;
            if (rd_len(&p, end, &len, err)) return -1;
            p += len;
            n++;
            continue;
        }
        if (skip_field(&p, end, f, wt, 2, err)) return -1;
    }
    return n;
}

/* Walk one XLine body; parse every events entry (and, with ``emit``, add it to the columns).
 * Returns the number of events. */
static Py_ssize_t walk_line(dec_t *d, const uint8_t *p, const uint8_t *end, int64_t ts_ns,
                            int emit) {
    Py_ssize_t n = 0;
    event_t ev;
    while (p < end) {
        uint32_t f;
        int wt;
        if (rd_tag(&p, end, &f, &wt, &d->err)) return -1;
        if (f == 4 && wt == 2) {
            uint64_t len;
            if (rd_len(&p, end, &len, &d->err)) return -1;
            if (read_event(d, p, p + len, 3, emit, &ev)) return -1;
            if (emit && emit_event(d, &ev, ts_ns)) return -1;
            p += len;
            n++;
            continue;
        }
        if (skip_field(&p, end, f, wt, 2, &d->err)) return -1;
    }
    return n;
}

static void dec_free(dec_t *d) {
    idmap_free(&d->stat_codes);
    idmap_free(&d->md);
    idmap_free(&d->refs);
    idmap_free(&d->defaults);
    strtab_free(&d->strs);
    free(d->code_of);
    free(d->md_code);
    free(d->start_ns);
    free(d->end_ns);
    for (int c = 0; c < NCODES_MAX; c++) {
        free(d->kinds[c]);
        free(d->vals[c]);
    }
}

static PyObject *bytes_of(const void *data, Py_ssize_t nbytes) {
    return PyBytes_FromStringAndSize(nbytes ? (const char *)data : "", nbytes);
}

static int check_range(Py_buffer *view, Py_ssize_t off, Py_ssize_t len) {
    if (off < 0 || len < 0 || off > view->len || len > view->len - off) {
        PyErr_SetString(PyExc_ValueError, "line range outside the buffer");
        return -1;
    }
    return 0;
}

/* One decode request, copied (with the GIL) into a dec_t ready to walk without it. */
typedef struct {
    dec_t d;
    Py_ssize_t off, len, n_events, counted;
    int64_t ts_ns;
} job_t;

/* A request's arguments as C values. Only exact ints, dicts, sets and tuples are accepted:
 * converting those runs no Python code, so nothing can change them while they are read. */
typedef struct {
    Py_ssize_t off, len;
    long long ts_ns;
    PyObject *codes, *default_md;  /* borrowed from the (owned) argument tuple */
    int ncodes, filter;
} request_t;

static int exact_int(PyObject *o, const char *what) {
    if (PyLong_CheckExact(o) || PyBool_Check(o)) return 0;
    PyErr_Format(PyExc_TypeError, "%s must be an int", what);
    return -1;
}

/* stat_codes (a dict: stat metadata id -> column code below ``ncodes``, exact ints) into
 * ``m`` (initialized: id -> dense index) and a new ``*code_of`` (dense index -> code). */
static int load_codes(PyObject *codes, int ncodes, idmap_t *m, int32_t **code_of) {
    PyObject *items = PyDict_Items(codes);  /* a copy of the pairs, sized once */
    if (!items) return -1;
    int rc = -1;
    Py_ssize_t nc = PyList_GET_SIZE(items);
    *code_of = malloc((nc + 1) * sizeof(int32_t));
    if (!*code_of) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        PyObject *k = PyTuple_GET_ITEM(kv, 0), *v = PyTuple_GET_ITEM(kv, 1);
        if (exact_int(k, "stat_codes keys") || exact_int(v, "stat_codes values")) goto done;
        long long key = PyLong_AsLongLong(k);
        long code = PyLong_AsLong(v);
        if (PyErr_Occurred()) goto done;
        if (code < 0 || code >= ncodes) {
            PyErr_SetString(PyExc_ValueError, "stat code out of range");
            goto done;
        }
        int is_new;
        int32_t ci = idmap_get(m, (uint64_t)key, &is_new);
        if (ci < 0) {
            PyErr_NoMemory();
            goto done;
        }
        (*code_of)[ci] = (int32_t)code;  /* ci <= i < nc + 1: within code_of */
    }
    rc = 0;
done:
    Py_DECREF(items);
    return rc;
}

/* items: offset, length, timestamp_ns, stat_codes, n_codes, default_md, filter */
static int parse_request(PyObject *const *items, request_t *r) {
    if (exact_int(items[0], "offset") || exact_int(items[1], "length") ||
        exact_int(items[2], "timestamp_ns") || exact_int(items[4], "n_codes") ||
        exact_int(items[6], "filter"))
        return -1;
    r->off = PyLong_AsSsize_t(items[0]);
    r->len = PyLong_AsSsize_t(items[1]);
    r->ts_ns = PyLong_AsLongLong(items[2]);
    long nc = PyLong_AsLong(items[4]);
    if (PyErr_Occurred()) return -1;
    r->codes = items[3];
    r->default_md = items[5];
    r->filter = items[6] == Py_True || (PyLong_CheckExact(items[6]) &&
                                        PyLong_AsLong(items[6]) != 0);
    if (PyErr_Occurred()) return -1;
    if (nc < 0 || nc > NCODES_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many stat codes");
        return -1;
    }
    r->ncodes = (int)nc;
    if (!PyDict_CheckExact(r->codes)) {
        PyErr_SetString(PyExc_TypeError, "stat_codes must be a dict");
        return -1;
    }
    if (r->default_md != Py_None && !PyAnySet_CheckExact(r->default_md)) {
        PyErr_SetString(PyExc_TypeError, "default_md must be a set or None");
        return -1;
    }
    return 0;
}

static int job_setup(job_t *j, Py_buffer *view, const request_t *r) {
    dec_t *d = &j->d;
    memset(j, 0, sizeof(*j));
    j->off = r->off;
    j->len = r->len;
    j->ts_ns = (int64_t)r->ts_ns;
    if (check_range(view, r->off, r->len)) return -1;
    d->ncodes = r->ncodes;
    d->filter = r->filter;
    const uint8_t *p = (const uint8_t *)view->buf + r->off;
    Py_ssize_t n = j->counted = count_events(p, p + r->len, &d->err);
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "%s", d->err.msg ? d->err.msg : "corrupt line");
        return -1;
    }
    if (idmap_init_direct(&d->stat_codes, 64, line_direct_bound(DIRECT_STATS, n)) ||
        idmap_init_direct(&d->md, line_start_cap(256, n), line_direct_bound(DIRECT_METADATA, n)) ||
        idmap_init_direct(&d->refs, line_start_cap(256, n), line_direct_bound(DIRECT_STATS, n)) ||
        idmap_init(&d->defaults, 64) || strtab_init(&d->strs)) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = -1;
    PyObject *ids = NULL;
    if (r->default_md != Py_None) {
        ids = PySequence_Tuple(r->default_md);  /* a copy: exact sets run no Python code */
        if (!ids) goto done;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ids); i++) {
            PyObject *item = PyTuple_GET_ITEM(ids, i);
            if (exact_int(item, "default_md items")) goto done;
            long long key = PyLong_AsLongLong(item);
            int is_new;
            if (key == -1 && PyErr_Occurred()) goto done;
            if (idmap_get(&d->defaults, (uint64_t)key, &is_new) < 0) {
                PyErr_NoMemory();
                goto done;
            }
        }
    }
    if (load_codes(r->codes, r->ncodes, &d->stat_codes, &d->code_of)) goto done;
    rc = 0;
done:
    Py_XDECREF(ids);
    return rc;
}

/* The column memory budget of one call over ``view`` (see COLUMN_BUDGET_FACTOR). */
static int check_budget(Py_buffer *view, job_t *jobs, Py_ssize_t n) {
    long long need = 0, budget = COLUMN_BUDGET_FACTOR * (long long)view->len +
                                 COLUMN_BUDGET_BASE;
    for (Py_ssize_t i = 0; i < n; i++) need += column_bytes(jobs[i].counted, jobs[i].d.ncodes);
    if (need <= budget) return 0;
    PyErr_Format(PyExc_ValueError, "its events would take %lld MiB of columns, more than "
                 "%d bytes per input byte: refused", need >> 20, COLUMN_BUDGET_FACTOR);
    return -1;
}

/* The walk itself: no Python objects touched, so it runs without the GIL. */
static void job_walk(job_t *j, const uint8_t *base) {
    const uint8_t *p = base + j->off;
    if (alloc_outputs(&j->d, j->counted)) {
        j->d.oom = 1;
        return;
    }
    j->n_events = walk_line(&j->d, p, p + j->len, j->ts_ns, 1);
}

/* The result dict of a walked job (or NULL with an exception set). */
static PyObject *job_result(job_t *j) {
    dec_t *d = &j->d;
    if (d->oom) return PyErr_NoMemory();
    if (j->n_events < 0) {
        PyErr_Format(PyExc_ValueError, "%s", d->err.msg ? d->err.msg : "corrupt line");
        return NULL;
    }
    Py_ssize_t n = d->n;
    int ncodes = d->ncodes;
    PyObject *kinds = PyList_New(ncodes), *vals = PyList_New(ncodes),
             *masks = PyList_New(ncodes), *strings = PyList_New((Py_ssize_t)d->strs.n);
    if (!kinds || !vals || !masks || !strings) goto fail;
    for (int c = 0; c < ncodes; c++) {
        PyObject *kb = bytes_of(d->kinds[c], n);
        PyObject *vb = d->vals[c] ? bytes_of(d->vals[c], n * 8) : (Py_INCREF(Py_None), Py_None);
        if (!kb || !vb) {
            Py_XDECREF(kb);
            Py_XDECREF(vb);
            goto fail;
        }
        PyList_SET_ITEM(kinds, c, kb);
        PyList_SET_ITEM(vals, c, vb);
        PyObject *mb = PyLong_FromUnsignedLong(d->kind_mask[c]);
        if (!mb) goto fail;
        PyList_SET_ITEM(masks, c, mb);
    }
    for (size_t i = 0; i < d->strs.n; i++) {
        PyObject *s = d->strs.kind[i] == K_STR
            ? PyUnicode_DecodeUTF8((const char *)d->strs.ptr[i], d->strs.len[i], "strict")
            : PyBytes_FromStringAndSize((const char *)d->strs.ptr[i], d->strs.len[i]);
        if (!s) goto fail;
        PyList_SET_ITEM(strings, (Py_ssize_t)i, s);
    }
    return Py_BuildValue(
        "{s:n,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:N,s:L,s:n}",
        "n", n,
        "md_code", bytes_of(d->md_code, n * 4),
        "md_ids", bytes_of(d->md.order, (Py_ssize_t)d->md.n * 8),
        "md_counts", bytes_of(d->md.counts, (Py_ssize_t)d->md.n * 8),
        "start_ns", bytes_of(d->start_ns, n * 8),
        "end_ns", bytes_of(d->end_ns, n * 8),
        "kinds", kinds,
        "kind_masks", masks,
        "vals", vals,
        "ref_ids", bytes_of(d->refs.order, (Py_ssize_t)d->refs.n * 8),
        "strings", strings,
        "negative", (long long)d->negative,
        "events", j->n_events);
fail:
    Py_XDECREF(kinds);
    Py_XDECREF(vals);
    Py_XDECREF(masks);
    Py_XDECREF(strings);
    return NULL;
}

/* decode(buf, offset, length, timestamp_ns, stat_codes: dict[int, int], n_codes,
 *        default_md: set[int] | None, filter: bool) -> dict
 *
 * Columns of the line's events whose duration is not negative (and, with ``filter``, that
 * carry a wanted stat or have default stats), in order:
 *   n, md_code (int32), md_ids (int64: dense code -> metadata id), md_counts (int64:
 *   non-negative events per metadata id, filtered ones included), start_ns, end_ns (int64),
 *   kinds (list of n_codes bytes, one kind per row), kind_masks (list of n_codes ints: bit k
 *   set when a row of the column has kind k), vals (list of n_codes bytes of int64 or
 *   None when the column has no value), ref_ids (int64: dense ref code -> ref value),
 *   strings (list of str/bytes: inline values), negative (events with duration < 0),
 *   events (all events of the line).
 * Values: int64/uint64 as their 64 bits, double as its IEEE bits, ref as its dense ref code,
 * str/bytes as their index in ``strings``.
 */
static PyObject *py_decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *a[7], *result = NULL;
    if (!PyArg_ParseTuple(args, "y*OOOOOOO", &view, &a[0], &a[1], &a[2], &a[3], &a[4], &a[5],
                          &a[6]))
        return NULL;
    request_t r;
    job_t j;
    memset(&j, 0, sizeof(j));
    if (parse_request(a, &r) == 0 && job_setup(&j, &view, &r) == 0 &&
        check_budget(&view, &j, 1) == 0) {
        Py_BEGIN_ALLOW_THREADS
        job_walk(&j, (const uint8_t *)view.buf);
        Py_END_ALLOW_THREADS
        result = job_result(&j);
    }
    dec_free(&j.d);
    PyBuffer_Release(&view);
    return result;
}

typedef struct {
    job_t *jobs;
    Py_ssize_t n;
    const uint8_t *base;
    Py_ssize_t next;
    pthread_mutex_t lock;
} pool_t;

static void *pool_worker(void *arg) {
    pool_t *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        Py_ssize_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n) return NULL;
        job_walk(&p->jobs[i], p->base);
    }
}

/* decode_many(buf, requests, threads) -> list of decode() results, in order. Each request is
 * a tuple (offset, length, timestamp_ns, stat_codes, n_codes, default_md, filter). The lines
 * are walked by up to ``threads`` threads at once, without the GIL; the caller decides how
 * many (the reading module knows how many files are read at once). */
static PyObject *py_decode_many(PyObject *self, PyObject *args) {
    Py_buffer view;
    PyObject *requests, *reqs = NULL, *result = NULL;
    int threads;
    if (!PyArg_ParseTuple(args, "y*Oi", &view, &requests, &threads)) return NULL;
    if (!PyList_CheckExact(requests) && !PyTuple_CheckExact(requests)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "requests must be a list");
        return NULL;
    }
    reqs = PySequence_Tuple(requests);  /* owned references: the list may not change them */
    if (!reqs) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(reqs), ready = 0;
    job_t *jobs = calloc(n ? n : 1, sizeof(job_t));
    if (!jobs) {
        Py_DECREF(reqs);
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    for (; ready < n; ready++) {
        PyObject *req = PyTuple_GET_ITEM(reqs, ready);
        request_t r;
        if (!PyTuple_CheckExact(req) || PyTuple_GET_SIZE(req) != 7) {
            PyErr_SetString(PyExc_TypeError, "each request must be a tuple of 7 items");
            goto done;
        }
        if (parse_request(((PyTupleObject *)req)->ob_item, &r)) goto done;
        if (job_setup(&jobs[ready], &view, &r)) {
            ready++;  /* its partial allocations are freed below */
            goto done;
        }
    }
    if (check_budget(&view, jobs, n)) goto done;
    {
        pool_t pool = {jobs, n, (const uint8_t *)view.buf, 0};
        int nt = threads < 1 ? 1 : threads > 16 ? 16 : threads;
        if (nt > n) nt = (int)n;
        pthread_t tids[16];
        int started = 0;
        pthread_mutex_init(&pool.lock, NULL);
        Py_BEGIN_ALLOW_THREADS
        for (int t = 1; t < nt; t++)
            if (pthread_create(&tids[started], NULL, pool_worker, &pool) == 0) started++;
        pool_worker(&pool);  /* this thread works too */
        for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
        Py_END_ALLOW_THREADS
        pthread_mutex_destroy(&pool.lock);
    }
    result = PyList_New(n);
    if (!result) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *r = job_result(&jobs[i]);
        if (!r) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, r);
    }
done:
    for (Py_ssize_t i = 0; i < ready; i++) dec_free(&jobs[i].d);
    free(jobs);
    Py_DECREF(reqs);
    PyBuffer_Release(&view);
    return result;
}

/* validate(buf, offset, length) -> number of events in the line, every byte checked. */
static PyObject *py_validate(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t off, len;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &off, &len)) return NULL;
    PyObject *result = NULL;
    dec_t d;
    memset(&d, 0, sizeof(d));
    if (check_range(&view, off, len) == 0) {
        const uint8_t *p = (const uint8_t *)view.buf + off;
        Py_ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = walk_line(&d, p, p + len, 0, 0);
        Py_END_ALLOW_THREADS
        if (n < 0)
            PyErr_Format(PyExc_ValueError, "%s", d.err.msg ? d.err.msg : "corrupt line");
        else
            result = PyLong_FromSsize_t(n);
    }
    PyBuffer_Release(&view);
    return result;
}

/* The Python value PlaneReader's stat_value gives for a stat of one event metadata (new
 * reference; None for no value, and for a ref value ``refs`` does not name). */
static PyObject *stat_object(const stat_t *st, const idmap_t *refs, PyObject *ref_items) {
    double d;
    switch (st->kind) {
        case K_INT64:
            return PyLong_FromLongLong(st->val);
        case K_UINT64:
            return PyLong_FromUnsignedLongLong((uint64_t)st->val);
        case K_DOUBLE:
            memcpy(&d, &st->val, 8);
            return PyFloat_FromDouble(d);
        case K_STR:
            return PyUnicode_DecodeUTF8((const char *)(intptr_t)st->val, st->len, "strict");
        case K_BYTES:
            return PyBytes_FromStringAndSize((const char *)(intptr_t)st->val, st->len);
        case K_REF:
            if (st->val >= 0) {  /* a uint64 above INT64_MAX names no (int64) stat metadata */
                int32_t i = idmap_find(refs, (uint64_t)st->val);
                if (i >= 0) {
                    PyObject *v = PyTuple_GET_ITEM(PyList_GET_ITEM(ref_items, i), 1);
                    Py_INCREF(v);
                    return v;
                }
            }
            Py_RETURN_NONE;
        default:
            Py_RETURN_NONE;
    }
}

/* event_metadata(buf, table, stat_codes, n_codes, ref_names) -> (names, by_code)
 *
 * The event metadata scan cut out of one plane (``table``: its cut bytes) as PlaneReader
 * (parsers/xspace/planes.py) reads map entries: names {id: name}, and by_code, per column
 * code below ``n_codes``, {id: default value} of the metadata whose stats set one (the last
 * stat of a code wins; values as stat_value gives them, a ref value through ``ref_names``,
 * {stat metadata id: value}; metadata whose value is None are left out). Arguments must be
 * exact ints and dicts with exact int keys; they are copied before anything else is done. */
static PyObject *py_event_metadata(PyObject *self, PyObject *args) {
    Py_buffer view, tab;
    PyObject *codes, *ncodes_o, *refs, *ref_items = NULL, *names = NULL, *by_code = NULL,
             *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*OOO", &view, &tab, &codes, &ncodes_o, &refs)) return NULL;
    idmap_t code_map = {0}, ref_map = {0};
    int32_t *code_of = NULL;
    long ncodes;
    if (exact_int(ncodes_o, "n_codes")) goto done;
    ncodes = PyLong_AsLong(ncodes_o);
    if (PyErr_Occurred()) goto done;
    if (ncodes < 0 || ncodes > NCODES_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many stat codes");
        goto done;
    }
    if (!PyDict_CheckExact(codes) || !PyDict_CheckExact(refs)) {
        PyErr_SetString(PyExc_TypeError, "stat_codes and ref_names must be dicts");
        goto done;
    }
    if (tab.len % 24) {
        PyErr_SetString(PyExc_ValueError, "the table is not (key, offset, length) triples");
        goto done;
    }
    if (idmap_init(&code_map, 64) || idmap_init(&ref_map, 64)) {
        PyErr_NoMemory();
        goto done;
    }
    if (load_codes(codes, (int)ncodes, &code_map, &code_of)) goto done;
    ref_items = PyDict_Items(refs);  /* a copy: its pairs stay alive, the dict may change */
    if (!ref_items) goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ref_items); i++) {
        PyObject *k = PyTuple_GET_ITEM(PyList_GET_ITEM(ref_items, i), 0);
        if (exact_int(k, "ref_names keys")) goto done;
        long long key = PyLong_AsLongLong(k);
        int is_new;
        if (key == -1 && PyErr_Occurred()) goto done;
        if (idmap_get(&ref_map, (uint64_t)key, &is_new) != (int32_t)i) {  /* dict: all new */
            PyErr_NoMemory();
            goto done;
        }
    }
    names = PyDict_New();
    by_code = PyList_New(ncodes);
    if (!names || !by_code) goto done;
    for (long c = 0; c < ncodes; c++) {
        PyObject *d = PyDict_New();
        if (!d) goto done;
        PyList_SET_ITEM(by_code, c, d);
    }
    const uint8_t *base = view.buf;
    Py_ssize_t n = tab.len / 24;
    md_stats_t stats;
    stats.codes = &code_map;
    stats.code_of = code_of;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t rec[3];
        memcpy(rec, (const char *)tab.buf + 24 * i, sizeof(rec));
        if (rec[1] < 0 || rec[2] < 0 || rec[1] > view.len || rec[2] > view.len - rec[1]) {
            PyErr_SetString(PyExc_ValueError, "event metadata outside the buffer");
            goto done;
        }
        const uint8_t *name;
        uint32_t name_len;
        memset(stats.set, 0, sizeof(stats.set));
        if (md_simple(base + rec[1], base + rec[1] + rec[2], 3, &name, &name_len, &stats) != 1) {
            PyErr_SetString(PyExc_ValueError, "not an event metadata scan cuts");
            goto done;
        }
        PyObject *key = PyLong_FromLongLong(rec[0]);
        PyObject *nm = key ? PyUnicode_DecodeUTF8((const char *)name, name_len, "strict")
                           : NULL;
        int bad = !nm || PyDict_SetItem(names, key, nm);
        Py_XDECREF(nm);
        for (long c = 0; !bad && c < ncodes; c++) {
            if (!stats.set[c]) continue;
            PyObject *v = stat_object(&stats.last[c], &ref_map, ref_items);
            if (!v) {
                bad = 1;
            } else if (v != Py_None && PyDict_SetItem(PyList_GET_ITEM(by_code, c), key, v)) {
                bad = 1;
            }
            Py_XDECREF(v);
        }
        Py_XDECREF(key);
        if (bad) goto done;
    }
    result = Py_BuildValue("(OO)", names, by_code);
done:
    idmap_free(&code_map);
    idmap_free(&ref_map);
    free(code_of);
    Py_XDECREF(ref_items);
    Py_XDECREF(names);
    Py_XDECREF(by_code);
    PyBuffer_Release(&tab);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS,
     "scan(buf, whole_planes=()) -> (skeleton, [(plane, line, offset, length, n_events)], "
     "[cut event metadata of each plane: bytes or None])"},
    {"decode", py_decode, METH_VARARGS,
     "decode(buf, offset, length, timestamp_ns, stat_codes, n_codes, default_md, filter)"},
    {"decode_many", py_decode_many, METH_VARARGS,
     "decode_many(buf, [(offset, length, timestamp_ns, stat_codes, n_codes, default_md, "
     "filter)], threads) -> [decode result]"},
    {"validate", py_validate, METH_VARARGS, "validate(buf, offset, length) -> n_events"},
    {"event_metadata", py_event_metadata, METH_VARARGS,
     "event_metadata(buf, cut, stat_codes, n_codes, ref_names) -> (names, by_code)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tracelens_xspace",
    "Columnar XSpace event decoder (see parsers/xspace/native.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

/* The per-process hash key, from os.urandom (the only randomness here: outputs never depend
 * on it, since dense codes follow first appearance). */
static int seed_hash(void) {
    PyObject *os = PyImport_ImportModule("os");
    if (!os) return -1;
    PyObject *b = PyObject_CallMethod(os, "urandom", "i", 16);
    Py_DECREF(os);
    if (!b) return -1;
    if (!PyBytes_Check(b) || PyBytes_GET_SIZE(b) != 16) {
        Py_DECREF(b);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom gave no 16 bytes");
        return -1;
    }
    memcpy(&g_k0, PyBytes_AS_STRING(b), 8);
    memcpy(&g_k1, PyBytes_AS_STRING(b) + 8, 8);
    Py_DECREF(b);
    return 0;
}

PyMODINIT_FUNC PyInit__tracelens_xspace(void) {
    if (seed_hash()) return NULL;
    PyObject *m = PyModule_Create(&module);
    /* bump with every change of the functions' signatures or results: the Python side
     * ignores a module built from other sources (parsers/xspace/native.py, ABI) */
    if (m && (PyModule_AddIntConstant(m, "ABI", 5) ||
              PyModule_AddIntConstant(m, "COLUMN_BUDGET_FACTOR", COLUMN_BUDGET_FACTOR) ||
              PyModule_AddIntConstant(m, "COLUMN_BUDGET_BASE", COLUMN_BUDGET_BASE))) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
