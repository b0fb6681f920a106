/* _tracelens_sweep: five hot loops of the analyses, in C. All are optional: the Python
 * module beside each is the reference and the path when this extension is not built (or when
 * TRACELENS_SWEEP=numpy asks for the reference), and the two give identical results.
 *
 * 1. The one-pass interval sweep behind the timeline breakdown
 *    (tracelens/analyze/timeline.py, _run_sums):
 *
 *   prio_sums(s, e, prio, runs, n_runs, n_cat, collective, memory)
 *       -> (sums, counts, totals): bytes of int64 arrays, row-major per run
 *
 * Rows are sorted on one time axis (groups laid end to end, each group's rows by start), so
 * a row's new coverage of a set of rows is its end minus the later of its start and the
 * latest end among the set's earlier rows (-1 before any). The sets are the category
 * levels u0..u{n_cat-1} (rows whose priority is at most k), then "collective" and "memory"
 * (rows of exactly that priority). ``runs`` is a list of int64 arrays, one per layout, each
 * giving every row's run in that layout (-1: not in it); per layout and run the sums of the
 * n_cat + 2 sets' new coverage, the row count per category and the summed duration per
 * category. numpy does the same in ten passes over the rows (the reference, and the path
 * when this module is not built); here it is one pass holding n_cat + 2 running maxima.
 *
 * Arithmetic is on uint64 so that sums wrap exactly as numpy's int64 sums do. Inputs are
 * checked (lengths, priorities in range, run ids below their count), never trusted.
 *
 * 2. The critical-path walk (tracelens/analyze/critical_walk.py, walk; ABI: WALK_ABI):
 *
 *   walk(s, e, b, b_bind, b_src, s_bind, s_src, s_at_start, prev_binds, group, a_last,
 *        comp, wait, edge_comp, prev_comp, idle, sink, w0, w1)
 *       -> (code, ns, on_node, on_ns, cut)
 *
 * The walk back along binding sources from a window's end is a pointer chase, one node at a
 * time: in Python over lists it costs about 1.4 us a node (and the lists must be made first),
 * here about 15 ns; a window without steps walks every node of the trace. It reads the
 * graph's arrays directly (critical_solve.Graph: float64
 * s, e, b per node; int64 b_bind, s_bind, group per node, b_src per B-side edge, s_src per
 * S-side edge, a_last per group; bool s_at_start per S-side edge, prev_binds per node) and
 * the components as small integer codes made by the caller: comp (a node's own work), wait
 * (waiting for that node's arrival) and prev_comp (the gap to the chain's previous node) per
 * node, edge_comp per S-side edge, idle. It returns the pieces from the end back as bytes of
 * int64 codes and float64 ns, the nodes with time on the path in the order the walk first
 * reached them with their float64 ns, and the number of revisits cut short. Every float
 * operation is the Python walk's, in the same order (max and min as Python's builtins pick,
 * an on-path sum as (0 + c) - lo, then (that + c) - lo), so the results are bit-identical.
 *
 * The graph is built by our code, but nothing here is trusted: every index is checked against
 * its array before it is read (ValueError, never a read out of bounds), and the walk is bounded
 * by its revisit set, a bitmap of 2 x n bits (node, standing at its start).
 *
 * 3. The critical-path forward pass (tracelens/analyze/critical_solve.py, solve; ABI:
 *    SOLVE_ABI):
 *
 *   solve(first, prev_lag, w, anchor, s_src, s_dst, s_start, s_lag, b_src, b_dst, b_lag,
 *         group, arrives, waits, a_lag, n_groups, out) -> 0 solved, 1 not exact, 2 a cycle
 *
 * The reference solves the graph in rounds over every node until nothing changes (as many as
 * the longest path switches chains): thousands of rounds over millions of nodes on a long
 * window. Here the same fixpoint is one pass in dependency order (Kahn's algorithm) over 2n + G
 * points: S_v (after E_{v-1} unless v starts a chain, and its S-side sources' S or E), E_v
 * (after S_v, E_{v-1}, its B-side sources' E and, where it waits, its group), G_g (after the S
 * of each arriving member), with the reference's formulas:
 *
 *   S_v = max(E_{v-1} + prev_lag_v, anchor_v, src + s_lag ...)
 *   E_v = max(E_{v-1} + (prev_lag_v + w_v), max(xs_v, E_src + b_lag ..., arr_g + a_lag_v) + w_v)
 *
 * (xs_v: S_v without the chain term). The inputs are the reference's derived arrays (float64
 * prev_lag, w, anchor, a_lag per node, s_lag per S-side edge, b_lag per B-side edge; int64
 * edge ends and group; bool first, s_start, arrives, waits), out a writable float64 array of n
 * for every node's end. The one pass equals the rounds bit for bit only on exact sums: it
 * answers 1 (out undefined) unless every input is an integer (an anchor may be -inf), the
 * first node starts a chain and the largest |anchor| plus the sum of every |work| and |lag|
 * (a bound on every path's sum) is below 2^51; an end at zero is +0.0 as in the rounds. Points
 * left when the queue empties are a cycle: it answers 2 (out undefined) and the caller runs
 * the rounds. Indices are checked before any is read (ValueError); the pass runs without the
 * GIL on ten arrays of n to 2n + G entries (and the edges' lists).
 *
 * 4. The compute time under each collective (tracelens/analyze/collectives.py,
 *    _hidden_by_compute; HIDDEN_ABI 1):
 *
 *   hidden(s, e, g, prio, compute, q_g, q0, q1) -> bytes of int64, one per query
 *
 * The rows of a device axis (intervals.on_one_axis: int64 s, e sorted by s, uint32 group g,
 * int32 priority), of which those whose priority is in the bitmask ``compute`` count. The
 * reference (_merged, then a binary search per point in numpy) makes a dozen arrays of the
 * rows' length; here one pass makes the merged segments (a segment starts where a start
 * passes every end before it, and ends at the running maximum of the ends just before the
 * next one starts; the running maximum is taken over every counted row, as numpy's
 * maximum.accumulate does), each with its group and the group's segment time before it. Per
 * query (q_g its group, -1 for none; q0 <= q1 on the axis): covered(q1) - covered(q0), where
 * covered(t) is the segment time of the query's group before t: the last segment starting at
 * or before t, when it is of that group, gives its time before plus min(t, its end) - its
 * start; else 0. Arithmetic wraps as numpy's int64 does (uint64). Lengths and priorities are
 * checked (ValueError); the pass and the searches run without the GIL.
 *
 * 5. The idle gaps and their pieces (tracelens/analyze/idle.py, _idle_on_axis; IDLE_ABI 1):
 *
 *   idle_gaps(s, e, g, shift, hi) -> (gap_g, gap_s, gap_e, gap_row): bytes of int64 each
 *   idle_pieces(gap_g, gap_s, gap_e, l_end, has) -> (g, part, start, end): bytes of int64
 *
 * idle_gaps reads a device axis (int64 s, e sorted by s, uint32 group g nondecreasing; per
 * group its int64 shift and last end hi). A row starts a gap when it is its group's first or
 * starts after every end before it (a running maximum that never needs a reset: groups lie
 * apart on the axis); the gap runs from that maximum (or -2^62 for a group's first row) to
 * the row's start, both less the group's shift, and gap_row is the row. After each group's
 * gaps comes its stretch from hi to 2^62 (gap_row -1), every group's in group order: the
 * reference's concatenation and stable sort by group. idle_pieces splits each gap at
 * cut = min(max(l_end, start), end) when ``has`` (uint8: a launch call ends at l_end):
 * [start, cut) host_launch (part 0) and [cut, end) launch_latency (2); without a launch
 * call [start, end) no_host_data (3); empty pieces are dropped. Lengths and groups are
 * checked (ValueError); both run without the GIL.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_CAT 64
#define MAX_LAYOUTS 8

typedef struct {
    Py_buffer view;
    int held;
} buf_t;

static int get_i64(PyObject *obj, buf_t *b, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (b->view.itemsize != 8 || !(strcmp(f, "l") == 0 || strcmp(f, "q") == 0 ||
                                   strcmp(f, "<q") == 0 || strcmp(f, "=q") == 0 ||
                                   strcmp(f, "<l") == 0 || strcmp(f, "=l") == 0)) {
        PyErr_Format(PyExc_TypeError, "%s: expected int64 values", what);
        return -1;
    }
    if (n >= 0 && b->view.len / 8 != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd values, got %zd", what, n,
                     b->view.len / 8);
        return -1;
    }
    return 0;
}

static void release(buf_t *b) {
    if (b->held) PyBuffer_Release(&b->view);
    b->held = 0;
}

static PyObject *py_prio_sums(PyObject *self, PyObject *args) {
    PyObject *s_obj, *e_obj, *p_obj, *runs_obj, *n_runs_obj;
    Py_ssize_t n_cat, coll, mem;
    if (!PyArg_ParseTuple(args, "OOOO!O!nnn", &s_obj, &e_obj, &p_obj, &PyList_Type, &runs_obj,
                          &PyList_Type, &n_runs_obj, &n_cat, &coll, &mem))
        return NULL;
    Py_ssize_t n_lay = PyList_GET_SIZE(runs_obj);
    if (n_cat < 1 || n_cat > MAX_CAT || coll < 0 || coll >= n_cat || mem < 0 || mem >= n_cat) {
        PyErr_SetString(PyExc_ValueError, "prio_sums: bad category numbers");
        return NULL;
    }
    if (n_lay < 1 || n_lay > MAX_LAYOUTS || PyList_GET_SIZE(n_runs_obj) != n_lay) {
        PyErr_SetString(PyExc_ValueError, "prio_sums: one run count per layout, 1 to 8");
        return NULL;
    }
    buf_t s = {0}, e = {0}, p = {0}, r[MAX_LAYOUTS];
    memset(r, 0, sizeof r);
    Py_ssize_t nr[MAX_LAYOUTS];
    uint64_t *sums[MAX_LAYOUTS], *counts[MAX_LAYOUTS], *totals[MAX_LAYOUTS];
    memset(sums, 0, sizeof sums);
    memset(counts, 0, sizeof counts);
    memset(totals, 0, sizeof totals);
    PyObject *result = NULL;
    const Py_ssize_t n_sets = n_cat + 2;

    if (get_i64(s_obj, &s, -1, "s") < 0) goto done;
    Py_ssize_t n = s.view.len / 8;
    if (get_i64(e_obj, &e, n, "e") < 0 || get_i64(p_obj, &p, n, "prio") < 0) goto done;
    for (Py_ssize_t k = 0; k < n_lay; k++) {
        nr[k] = PyLong_AsSsize_t(PyList_GET_ITEM(n_runs_obj, k));
        if (nr[k] < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "prio_sums: negative run count");
            goto done;
        }
        if (get_i64(PyList_GET_ITEM(runs_obj, k), &r[k], n, "runs") < 0) goto done;
        sums[k] = PyMem_Calloc((size_t)(nr[k] ? nr[k] : 1) * n_sets, sizeof(uint64_t));
        counts[k] = PyMem_Calloc((size_t)(nr[k] ? nr[k] : 1) * n_cat, sizeof(uint64_t));
        totals[k] = PyMem_Calloc((size_t)(nr[k] ? nr[k] : 1) * n_cat, sizeof(uint64_t));
        if (!sums[k] || !counts[k] || !totals[k]) {
            PyErr_NoMemory();
            goto done;
        }
    }
    {
        const int64_t *S = s.view.buf, *E = e.view.buf, *P = p.view.buf;
        const int64_t *R[MAX_LAYOUTS];
        for (Py_ssize_t k = 0; k < n_lay; k++) {
            R[k] = r[k].view.buf;
            for (Py_ssize_t i = 0; i < n; i++)
                if (R[k][i] < -1 || R[k][i] >= nr[k]) {
                    PyErr_SetString(PyExc_ValueError, "prio_sums: run id out of range");
                    goto done;
                }
        }
        for (Py_ssize_t i = 0; i < n; i++)
            if (P[i] < 0 || P[i] >= n_cat) {
                PyErr_SetString(PyExc_ValueError, "prio_sums: priority out of range");
                goto done;
            }
        int64_t seen[MAX_CAT + 2];
        uint64_t part[MAX_CAT + 2];
        for (Py_ssize_t k = 0; k < n_sets; k++) seen[k] = -1;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const int64_t si = S[i], ei = E[i], pi = P[i];
            /* the sets holding row i: levels pi.. n_cat-1, and collective or memory */
            for (Py_ssize_t k = 0; k < n_sets; k++) part[k] = 0;
            for (Py_ssize_t k = pi; k < n_cat; k++) {
                int64_t from = si > seen[k] ? si : seen[k];
                part[k] = ei > from ? (uint64_t)ei - (uint64_t)from : 0;
                if (ei > seen[k]) seen[k] = ei;
            }
            Py_ssize_t extra = pi == coll ? n_cat : (pi == mem ? n_cat + 1 : -1);
            if (extra >= 0) {
                int64_t from = si > seen[extra] ? si : seen[extra];
                part[extra] = ei > from ? (uint64_t)ei - (uint64_t)from : 0;
                if (ei > seen[extra]) seen[extra] = ei;
            }
            for (Py_ssize_t l = 0; l < n_lay; l++) {
                int64_t run = R[l][i];
                if (run < 0) continue;
                uint64_t *row = sums[l] + run * n_sets;
                for (Py_ssize_t k = pi; k < n_cat; k++) row[k] += part[k];
                if (extra >= 0) row[extra] += part[extra];
                counts[l][run * n_cat + pi] += 1;
                totals[l][run * n_cat + pi] += (uint64_t)ei - (uint64_t)si;
            }
        }
        Py_END_ALLOW_THREADS
    }
    result = PyList_New(n_lay);
    if (!result) goto done;
    for (Py_ssize_t k = 0; k < n_lay; k++) {
        PyObject *t = Py_BuildValue(
            "(y#y#y#)", (const char *)sums[k], (Py_ssize_t)(nr[k] * n_sets * 8),
            (const char *)counts[k], (Py_ssize_t)(nr[k] * n_cat * 8),
            (const char *)totals[k], (Py_ssize_t)(nr[k] * n_cat * 8));
        if (!t) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, t);
    }
done:
    release(&s);
    release(&e);
    release(&p);
    for (Py_ssize_t k = 0; k < MAX_LAYOUTS; k++) {
        release(&r[k]);
        PyMem_Free(sums[k]);
        PyMem_Free(counts[k]);
        PyMem_Free(totals[k]);
    }
    return result;
}

/* ----------------------------------------------------------------------------------------
 * 2. The critical-path walk (header).
 * ---------------------------------------------------------------------------------------- */

static int get_typed(PyObject *obj, buf_t *b, Py_ssize_t n, const char *what, char kind) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    b->held = 1;
    const char *f = b->view.format ? b->view.format : "B";
    if (*f == '<' || *f == '=' || *f == '@') f++;
    int ok;
    if (kind == 'd')
        ok = b->view.itemsize == 8 && strcmp(f, "d") == 0;
    else if (kind == 'q')
        ok = b->view.itemsize == 8 && (strcmp(f, "q") == 0 || strcmp(f, "l") == 0);
    else if (kind == 'I')  /* uint32 */
        ok = b->view.itemsize == 4 && (strcmp(f, "I") == 0 || strcmp(f, "L") == 0);
    else if (kind == 'i')  /* int32 */
        ok = b->view.itemsize == 4 && (strcmp(f, "i") == 0 || strcmp(f, "l") == 0);
    else /* '?': one byte per value, nonzero is true */
        ok = b->view.itemsize == 1 &&
             (strcmp(f, "?") == 0 || strcmp(f, "b") == 0 || strcmp(f, "B") == 0);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s values", what,
                     kind == 'd' ? "float64" : kind == 'q' ? "int64" : kind == 'I' ? "uint32"
                     : kind == 'i' ? "int32" : "bool");
        return -1;
    }
    Py_ssize_t got = b->view.len / b->view.itemsize;
    if (n >= 0 && got != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd values, got %zd", what, n, got);
        return -1;
    }
    return 0;
}

typedef struct {
    int64_t *key;
    double *ns;
    size_t len, cap;
} pairs_t;

/* append (key, ns); 0, or -1 when out of memory (no GIL needed: raw allocator) */
static int pairs_push(pairs_t *p, int64_t key, double ns) {
    if (p->len == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 1024;
        int64_t *k = PyMem_RawRealloc(p->key, cap * sizeof(int64_t));
        if (!k) return -1;
        p->key = k;
        double *v = PyMem_RawRealloc(p->ns, cap * sizeof(double));
        if (!v) return -1;
        p->ns = v;
        p->cap = cap;
    }
    p->key[p->len] = key;
    p->ns[p->len] = ns;
    p->len++;
    return 0;
}

static void pairs_free(pairs_t *p) {
    PyMem_RawFree(p->key);
    PyMem_RawFree(p->ns);
    p->key = NULL;
    p->ns = NULL;
}

/* Python's max(a, b) and min(a, b) on two floats: the first unless the second is strictly
 * greater (smaller); NaN and signed zeros come out as there */
static inline double py_max(double a, double b) { return b > a ? b : a; }
static inline double py_min(double a, double b) { return b < a ? b : a; }

enum { W_ARRAYS = 15 };

static PyObject *py_walk(PyObject *self, PyObject *args) {
    PyObject *obj[W_ARRAYS];
    long long idle_ll, sink_ll;
    double w0, w1;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOLLdd", &obj[0], &obj[1], &obj[2], &obj[3],
                          &obj[4], &obj[5], &obj[6], &obj[7], &obj[8], &obj[9], &obj[10],
                          &obj[11], &obj[12], &obj[13], &obj[14], &idle_ll, &sink_ll, &w0,
                          &w1))
        return NULL;
    buf_t bs[W_ARRAYS];
    memset(bs, 0, sizeof bs);
    pairs_t pieces = {0}, on = {0};
    uint8_t *seen = NULL;
    PyObject *result = NULL;
    int64_t cut = 0;
    const char *fail = NULL; /* a ValueError found without the GIL */
    int oom = 0;

    /* s, e, b, b_bind: per node; b_src: per B-side edge; s_bind: per node; s_src,
     * s_at_start: per S-side edge; prev_binds, group: per node; a_last: per group; comp,
     * wait: per node; edge_comp: per S-side edge; prev_comp: per node */
    if (get_typed(obj[0], &bs[0], -1, "s", 'd') < 0) goto done;
    const Py_ssize_t n = bs[0].view.len / 8;
    if (get_typed(obj[1], &bs[1], n, "e", 'd') < 0 || get_typed(obj[2], &bs[2], n, "b", 'd') < 0 ||
        get_typed(obj[3], &bs[3], n, "b_bind", 'q') < 0 ||
        get_typed(obj[4], &bs[4], -1, "b_src", 'q') < 0 ||
        get_typed(obj[5], &bs[5], n, "s_bind", 'q') < 0 ||
        get_typed(obj[6], &bs[6], -1, "s_src", 'q') < 0)
        goto done;
    const Py_ssize_t nb = bs[4].view.len / 8, ns_ = bs[6].view.len / 8;
    if (get_typed(obj[7], &bs[7], ns_, "s_at_start", '?') < 0 ||
        get_typed(obj[8], &bs[8], n, "prev_binds", '?') < 0 ||
        get_typed(obj[9], &bs[9], n, "group", 'q') < 0 ||
        get_typed(obj[10], &bs[10], -1, "a_last", 'q') < 0 ||
        get_typed(obj[11], &bs[11], n, "comp", 'q') < 0 ||
        get_typed(obj[12], &bs[12], n, "wait", 'q') < 0 ||
        get_typed(obj[13], &bs[13], ns_, "edge_comp", 'q') < 0 ||
        get_typed(obj[14], &bs[14], n, "prev_comp", 'q') < 0)
        goto done;
    const Py_ssize_t ng = bs[10].view.len / 8;
    if (sink_ll < 0 || sink_ll >= n) {
        PyErr_SetString(PyExc_ValueError, "walk: sink out of range");
        goto done;
    }
    seen = PyMem_RawCalloc((size_t)(2 * n + 7) / 8, 1);
    if (!seen) {
        PyErr_NoMemory();
        goto done;
    }
    {
        const double *S = bs[0].view.buf, *E = bs[1].view.buf, *B = bs[2].view.buf;
        const int64_t *b_bind = bs[3].view.buf, *b_src = bs[4].view.buf;
        const int64_t *s_bind = bs[5].view.buf, *s_src = bs[6].view.buf;
        const uint8_t *s_at_start = bs[7].view.buf, *prev_binds = bs[8].view.buf;
        const int64_t *group = bs[9].view.buf, *a_last = bs[10].view.buf;
        const int64_t *comp = bs[11].view.buf, *wait = bs[12].view.buf;
        const int64_t *edge_comp = bs[13].view.buf, *prev_comp = bs[14].view.buf;
        const int64_t idle = (int64_t)idle_ll;
#define PUSH(p, k, v)                 \
    do {                              \
        if (pairs_push(p, k, v) < 0) { \
            oom = 1;                  \
            goto walked;              \
        }                             \
    } while (0)
#define FAIL(msg)   \
    do {            \
        fail = msg; \
        goto walked; \
    } while (0)
        Py_BEGIN_ALLOW_THREADS
        /* the Python walk, line for line (tracelens/analyze/critical_walk.py) */
        double c = w1;
        int64_t node = (int64_t)sink_ll;
        if (E[node] < c) {
            PUSH(&pieces, idle, c - py_max(E[node], w0));
            c = py_max(E[node], w0);
        }
        int at_start = 0;
        while (c > w0) {
            const size_t key = 2 * (size_t)node + (size_t)at_start;
            if (seen[key >> 3] & (1u << (key & 7))) {
                PUSH(&pieces, idle, c - w0);
                cut++;
                break;
            }
            seen[key >> 3] |= (uint8_t)(1u << (key & 7));
            if (!at_start) {
                /* a node's own visit happens once (the revisit set), so its on-path time
                 * is the last entry of `on` when this visit made one */
                const size_t on_before = on.len;
                double lo = py_max(B[node], w0);
                if (c > lo) {
                    PUSH(&pieces, comp[node], c - lo);
                    PUSH(&on, node, (0.0 + c) - lo);
                    c = lo;
                }
                if (c <= w0) break;
                const int64_t bind = b_bind[node];
                if (B[node] > S[node] && bind == -2) { /* waited for the last arrival */
                    lo = py_max(S[node], w0);
                    const int64_t grp = group[node];
                    if (grp < 0 || grp >= ng) FAIL("walk: group out of range");
                    const int64_t last = a_last[grp];
                    if (last < 0 || last >= n) FAIL("walk: a_last out of range");
                    PUSH(&pieces, wait[last], c - lo);
                    if (on.len > on_before)
                        on.ns[on.len - 1] = (on.ns[on.len - 1] + c) - lo;
                    else
                        PUSH(&on, node, (0.0 + c) - lo);
                    c = lo;
                    if (last != node) { /* below its own arrival: the last arriver's history */
                        node = last;
                        at_start = 1;
                        continue;
                    }
                } else if (B[node] > S[node] && bind >= 0) { /* a sync call: to its wait */
                    if (bind >= nb) FAIL("walk: b_bind out of range");
                    const int64_t to = b_src[bind];
                    if (to < 0 || to >= n) FAIL("walk: b_src out of range");
                    node = to;
                    at_start = 0;
                    c = py_min(c, E[node]);
                    continue;
                }
            }
            if (c <= w0) break;
            const int64_t edge = s_bind[node];
            int64_t src, code;
            double t;
            int nxt_start;
            if (edge >= 0) {
                if (edge >= ns_) FAIL("walk: s_bind out of range");
                src = s_src[edge];
                if (src < 0 || src >= n) FAIL("walk: s_src out of range");
                t = s_at_start[edge] ? S[src] : E[src];
                code = edge_comp[edge];
                nxt_start = s_at_start[edge] != 0;
            } else if (prev_binds[node]) {
                if (node < 1) FAIL("walk: the first node has no previous node");
                src = node - 1;
                t = E[node - 1];
                code = prev_comp[node];
                nxt_start = 0;
            } else { /* no source: the time before it on its chain (a host thread's own
                      * untraced time; idle on a stream) */
                PUSH(&pieces, prev_comp[node], c - w0);
                break;
            }
            if (t < c) {
                const double lo = py_max(t, w0);
                PUSH(&pieces, code, c - lo);
                c = lo;
            }
            node = src;
            at_start = nxt_start;
        }
    walked:
        Py_END_ALLOW_THREADS
#undef PUSH
#undef FAIL
    }
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (fail) {
        PyErr_SetString(PyExc_ValueError, fail);
        goto done;
    }
    /* y# of a NULL pointer is None: an empty walk's arrays are empty bytes */
#define BYTES(p) ((p) ? (const char *)(p) : "")
    result = Py_BuildValue("(y#y#y#y#L)", BYTES(pieces.key),
                           (Py_ssize_t)(pieces.len * sizeof(int64_t)), BYTES(pieces.ns),
                           (Py_ssize_t)(pieces.len * sizeof(double)), BYTES(on.key),
                           (Py_ssize_t)(on.len * sizeof(int64_t)), BYTES(on.ns),
                           (Py_ssize_t)(on.len * sizeof(double)), (long long)cut);
#undef BYTES
done:
    for (int k = 0; k < W_ARRAYS; k++) release(&bs[k]);
    pairs_free(&pieces);
    pairs_free(&on);
    PyMem_RawFree(seen);
    return result;
}

/* ----------------------------------------------------------------------------------------
 * 3. The critical-path forward pass (header).
 * ---------------------------------------------------------------------------------------- */

#define EXACT_BOUND 2251799813685248.0 /* 2^51: every sum below it is exact on integers */

/* x is an integer (finite); with neg_inf_ok, -inf too */
static inline int is_int(double x, int neg_inf_ok) {
    if (neg_inf_ok && isinf(x) && x < 0) return 1;
    return isfinite(x) && x == floor(x);
}

static inline double dmax(double a, double b) { return b > a ? b : a; }

enum { S_ARRAYS = 15 };
enum { SOLVED = 0, NOT_EXACT = 1, CYCLE = 2 };

static PyObject *py_solve(PyObject *self, PyObject *args) {
    PyObject *obj[S_ARRAYS], *out_obj;
    Py_ssize_t ng;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOOOOOnO", &obj[0], &obj[1], &obj[2], &obj[3],
                          &obj[4], &obj[5], &obj[6], &obj[7], &obj[8], &obj[9], &obj[10],
                          &obj[11], &obj[12], &obj[13], &obj[14], &ng, &out_obj))
        return NULL;
    buf_t bs[S_ARRAYS], out = {0};
    memset(bs, 0, sizeof bs);
    int64_t *indeg = NULL, *s_off = NULL, *s_out = NULL, *b_off = NULL, *b_out = NULL;
    int64_t *g_off = NULL, *g_out = NULL, *queue = NULL;
    double *xs = NULL, *xb = NULL, *arr = NULL;
    PyObject *result = NULL;
    const char *fail = NULL; /* a ValueError found without the GIL */
    int oom = 0, status = SOLVED;

    /* first, prev_lag, w, anchor: per node; s_src, s_dst, s_start, s_lag: per S-side edge;
     * b_src, b_dst, b_lag: per B-side edge; group, arrives, waits, a_lag: per node */
    if (get_typed(obj[0], &bs[0], -1, "first", '?') < 0) goto done;
    const Py_ssize_t n = bs[0].view.len;
    if (get_typed(obj[1], &bs[1], n, "prev_lag", 'd') < 0 ||
        get_typed(obj[2], &bs[2], n, "w", 'd') < 0 ||
        get_typed(obj[3], &bs[3], n, "anchor", 'd') < 0 ||
        get_typed(obj[4], &bs[4], -1, "s_src", 'q') < 0)
        goto done;
    const Py_ssize_t ms = bs[4].view.len / 8;
    if (get_typed(obj[5], &bs[5], ms, "s_dst", 'q') < 0 ||
        get_typed(obj[6], &bs[6], ms, "s_start", '?') < 0 ||
        get_typed(obj[7], &bs[7], ms, "s_lag", 'd') < 0 ||
        get_typed(obj[8], &bs[8], -1, "b_src", 'q') < 0)
        goto done;
    const Py_ssize_t mb = bs[8].view.len / 8;
    if (get_typed(obj[9], &bs[9], mb, "b_dst", 'q') < 0 ||
        get_typed(obj[10], &bs[10], mb, "b_lag", 'd') < 0 ||
        get_typed(obj[11], &bs[11], n, "group", 'q') < 0 ||
        get_typed(obj[12], &bs[12], n, "arrives", '?') < 0 ||
        get_typed(obj[13], &bs[13], n, "waits", '?') < 0 ||
        get_typed(obj[14], &bs[14], n, "a_lag", 'd') < 0)
        goto done;
    if (ng < 0) {
        PyErr_SetString(PyExc_ValueError, "solve: negative group count");
        goto done;
    }
    if (PyObject_GetBuffer(out_obj, &out.view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                           PyBUF_WRITABLE) < 0)
        goto done;
    out.held = 1;
    {
        const char *f = out.view.format ? out.view.format : "B";
        if (*f == '<' || *f == '=' || *f == '@') f++;
        if (out.view.itemsize != 8 || strcmp(f, "d") != 0 || out.view.len / 8 != n) {
            PyErr_SetString(PyExc_ValueError, "solve: out must be n float64 values");
            goto done;
        }
    }
    if (n == 0) {
        result = PyLong_FromLong(SOLVED);
        goto done;
    }
    {
        const size_t np_ = (size_t)n, P = 2 * np_ + (size_t)ng; /* points: S, E, groups */
        const uint8_t *first = bs[0].view.buf, *s_start = bs[6].view.buf;
        const uint8_t *arrives = bs[12].view.buf, *waits = bs[13].view.buf;
        const double *prev_lag = bs[1].view.buf, *w = bs[2].view.buf, *anchor = bs[3].view.buf;
        const double *s_lag = bs[7].view.buf, *b_lag = bs[10].view.buf, *a_lag = bs[14].view.buf;
        const int64_t *s_src = bs[4].view.buf, *s_dst = bs[5].view.buf;
        const int64_t *b_src = bs[8].view.buf, *b_dst = bs[9].view.buf;
        const int64_t *group = bs[11].view.buf;
        double *E = out.view.buf;
        const double NEG_INF = -INFINITY;
#define FAIL(msg)   \
    do {            \
        fail = msg; \
        goto solved; \
    } while (0)
#define ALLOC(p, count, type)                                         \
    do {                                                              \
        p = PyMem_RawMalloc(((size_t)(count) + 1) * sizeof(type));    \
        if (!p) {                                                     \
            oom = 1;                                                  \
            goto solved;                                              \
        }                                                             \
    } while (0)
        Py_BEGIN_ALLOW_THREADS
        /* indices first: every one in range, or a ValueError */
        for (Py_ssize_t i = 0; i < ms; i++)
            if (s_src[i] < 0 || s_src[i] >= n || s_dst[i] < 0 || s_dst[i] >= n)
                FAIL("solve: S-side edge node out of range");
        for (Py_ssize_t i = 0; i < mb; i++)
            if (b_src[i] < 0 || b_src[i] >= n || b_dst[i] < 0 || b_dst[i] >= n)
                FAIL("solve: B-side edge node out of range");
        for (Py_ssize_t v = 0; v < n; v++)
            if ((arrives[v] || waits[v]) && (group[v] < 0 || group[v] >= ng))
                FAIL("solve: group out of range");
        /* exact: integer inputs, and a bound on every path's sum (module doc) */
        {
            double bound = 0.0, top = 0.0;
            for (Py_ssize_t v = 0; v < n; v++) {
                if (!is_int(prev_lag[v], 0) || !is_int(w[v], 0) || !is_int(a_lag[v], 0) ||
                    !is_int(anchor[v], 1)) {
                    status = NOT_EXACT;
                    goto solved;
                }
                bound += fabs(prev_lag[v]) + fabs(w[v]) + fabs(a_lag[v]);
                if (isfinite(anchor[v])) top = dmax(top, fabs(anchor[v]));
            }
            for (Py_ssize_t i = 0; i < ms; i++) {
                if (!is_int(s_lag[i], 0)) {
                    status = NOT_EXACT;
                    goto solved;
                }
                bound += fabs(s_lag[i]);
            }
            for (Py_ssize_t i = 0; i < mb; i++) {
                if (!is_int(b_lag[i], 0)) {
                    status = NOT_EXACT;
                    goto solved;
                }
                bound += fabs(b_lag[i]);
            }
            if (!first[0] || !(bound + top < EXACT_BOUND)) {
                status = NOT_EXACT;
                goto solved;
            }
        }
        ALLOC(indeg, P, int64_t);
        ALLOC(s_off, 2 * np_ + 1, int64_t);
        ALLOC(s_out, ms, int64_t);
        ALLOC(b_off, np_ + 1, int64_t);
        ALLOC(b_out, mb, int64_t);
        ALLOC(g_off, (size_t)ng + 1, int64_t);
        ALLOC(g_out, np_, int64_t);
        ALLOC(queue, P, int64_t);
        ALLOC(xs, np_, double);
        ALLOC(xb, np_, double);
        ALLOC(arr, (size_t)ng, double);
        memset(indeg, 0, P * sizeof(int64_t));
        memset(s_off, 0, (2 * np_ + 1) * sizeof(int64_t));
        memset(b_off, 0, (np_ + 1) * sizeof(int64_t));
        memset(g_off, 0, ((size_t)ng + 1) * sizeof(int64_t));
        /* the successor lists (counting sort): S-side edges by source point (its S: src, its
         * E: n + src), B-side edges by source node, waiting members by group */
        for (Py_ssize_t i = 0; i < ms; i++) {
            s_off[(s_start[i] ? 0 : np_) + (size_t)s_src[i] + 1]++;
            indeg[s_dst[i]]++;
        }
        for (Py_ssize_t i = 0; i < mb; i++) {
            b_off[b_src[i] + 1]++;
            indeg[np_ + (size_t)b_dst[i]]++;
        }
        for (Py_ssize_t v = 0; v < n; v++) {
            const int chained = v > 0 && !first[v];
            indeg[v] += chained;                     /* S_v <- E_{v-1} */
            indeg[np_ + v] += 1 + chained + waits[v]; /* E_v <- S_v, E_{v-1}, its group */
            if (waits[v]) g_off[group[v] + 1]++;
            if (arrives[v]) indeg[2 * np_ + (size_t)group[v]]++; /* G_g <- S_u */
            xs[v] = anchor[v];
            xb[v] = NEG_INF;
        }
        for (Py_ssize_t g = 0; g < ng; g++) arr[g] = NEG_INF;
        for (size_t k = 0; k < 2 * np_; k++) s_off[k + 1] += s_off[k];
        for (size_t k = 0; k < np_; k++) b_off[k + 1] += b_off[k];
        for (Py_ssize_t g = 0; g < ng; g++) g_off[g + 1] += g_off[g];
        /* fill with queue as the running cursor of each list */
        memcpy(queue, s_off, 2 * np_ * sizeof(int64_t));
        for (Py_ssize_t i = 0; i < ms; i++)
            s_out[queue[(s_start[i] ? 0 : np_) + (size_t)s_src[i]]++] = i;
        memcpy(queue, b_off, np_ * sizeof(int64_t));
        for (Py_ssize_t i = 0; i < mb; i++) b_out[queue[b_src[i]]++] = i;
        memcpy(queue, g_off, (size_t)ng * sizeof(int64_t));
        for (Py_ssize_t v = 0; v < n; v++)
            if (waits[v]) g_out[queue[group[v]]++] = v;
        /* Kahn: a point is computed once every point it reads is final */
        size_t head = 0, tail = 0;
        for (size_t p = 0; p < P; p++)
            if (indeg[p] == 0) queue[tail++] = (int64_t)p;
#define READY(q)                                        \
    do {                                                \
        if (--indeg[q] == 0) queue[tail++] = (int64_t)(q); \
    } while (0)
        while (head < tail) {
            const size_t p = (size_t)queue[head++];
            if (p < np_) { /* S_v = max(E_{v-1} + lag, external S-side sources, anchor) */
                const size_t v = p;
                const int chained = v > 0 && !first[v];
                const double s = dmax(chained ? E[v - 1] + prev_lag[v] : NEG_INF, xs[v]);
                for (int64_t k = s_off[v]; k < s_off[v + 1]; k++) {
                    const int64_t i = s_out[k];
                    xs[s_dst[i]] = dmax(xs[s_dst[i]], s + s_lag[i]);
                    READY((size_t)s_dst[i]);
                }
                if (arrives[v]) {
                    arr[group[v]] = dmax(arr[group[v]], s);
                    READY(2 * np_ + (size_t)group[v]);
                }
                READY(np_ + v);
            } else if (p < 2 * np_) { /* E_v = max(E_{v-1} + lag + w, max(xs, xb) + w) */
                const size_t v = p - np_;
                const int chained = v > 0 && !first[v];
                double b = xb[v];
                if (waits[v]) b = dmax(b, arr[group[v]] + a_lag[v]);
                const double z = dmax(xs[v], b) + w[v];
                /* + 0.0: the rounds never end at -0.0 (their ends are sums from +0.0) */
                const double e = (chained ? dmax(E[v - 1] + (prev_lag[v] + w[v]), z) : z) + 0.0;
                E[v] = e;
                for (int64_t k = s_off[np_ + v]; k < s_off[np_ + v + 1]; k++) {
                    const int64_t i = s_out[k];
                    xs[s_dst[i]] = dmax(xs[s_dst[i]], e + s_lag[i]);
                    READY((size_t)s_dst[i]);
                }
                for (int64_t k = b_off[v]; k < b_off[v + 1]; k++) {
                    const int64_t i = b_out[k];
                    xb[b_dst[i]] = dmax(xb[b_dst[i]], e + b_lag[i]);
                    READY(np_ + (size_t)b_dst[i]);
                }
                if (v + 1 < np_ && !first[v + 1]) {
                    READY(v + 1);
                    READY(np_ + v + 1);
                }
            } else { /* G_g: its last arrival is final */
                const size_t g = p - 2 * np_;
                for (int64_t k = g_off[g]; k < g_off[g + 1]; k++) READY(np_ + (size_t)g_out[k]);
            }
        }
#undef READY
        if (tail < P) status = CYCLE; /* points left: a cycle; the caller's rounds decide */
    solved:
        Py_END_ALLOW_THREADS
#undef FAIL
#undef ALLOC
    }
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (fail) {
        PyErr_SetString(PyExc_ValueError, fail);
        goto done;
    }
    result = PyLong_FromLong(status);
done:
    for (int k = 0; k < S_ARRAYS; k++) release(&bs[k]);
    release(&out);
    PyMem_RawFree(indeg);
    PyMem_RawFree(s_off);
    PyMem_RawFree(s_out);
    PyMem_RawFree(b_off);
    PyMem_RawFree(b_out);
    PyMem_RawFree(g_off);
    PyMem_RawFree(g_out);
    PyMem_RawFree(queue);
    PyMem_RawFree(xs);
    PyMem_RawFree(xb);
    PyMem_RawFree(arr);
    return result;
}

/* ----------------------------------------------------------------------------------------
 * 4. The compute time under each collective.
 * ---------------------------------------------------------------------------------------- */

/* the last index i with a[i] <= t in sorted a[0..n) (-1: none), galloping from ``hint``
 * (the answer for a nearby t): a collective's start and end lie near the previous one's */
static Py_ssize_t last_at_or_before(const int64_t *a, Py_ssize_t n, int64_t t,
                                    Py_ssize_t hint) {
    Py_ssize_t lo, hi;  /* a[lo - 1] <= t (or lo == 0) and a[hi] > t (or hi == n) */
    if (hint >= 0 && hint < n && a[hint] <= t) {
        Py_ssize_t step = 1;
        lo = hint + 1;
        while (lo + step - 1 < n && a[lo + step - 1] <= t) {
            lo += step;
            step *= 2;
        }
        hi = lo + step - 1 < n ? lo + step - 1 : n;
    } else {
        lo = 0;
        hi = (hint >= 0 && hint < n) ? hint : n;
    }
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] <= t) lo = mid + 1; else hi = mid;
    }
    return lo - 1;
}

static PyObject *py_hidden(PyObject *self, PyObject *args) {
    PyObject *s_obj, *e_obj, *g_obj, *p_obj, *mask_obj, *qg_obj, *q0_obj, *q1_obj;
    if (!PyArg_ParseTuple(args, "OOOOO!OOO", &s_obj, &e_obj, &g_obj, &p_obj, &PyLong_Type,
                          &mask_obj, &qg_obj, &q0_obj, &q1_obj))
        return NULL;
    unsigned long long mask = PyLong_AsUnsignedLongLong(mask_obj);
    if (PyErr_Occurred()) return NULL;
    buf_t s = {0}, e = {0}, g = {0}, p = {0}, qg = {0}, q0 = {0}, q1 = {0};
    PyObject *result = NULL;
    int64_t *seg_s = NULL, *seg_e = NULL, *before = NULL;
    uint32_t *seg_g = NULL;
    if (get_typed(s_obj, &s, -1, "hidden: s", 'q') < 0) goto done;
    Py_ssize_t n = s.view.len / 8;
    if (get_typed(e_obj, &e, n, "hidden: e", 'q') < 0 ||
        get_typed(g_obj, &g, n, "hidden: g", 'I') < 0 ||
        get_typed(p_obj, &p, n, "hidden: prio", 'i') < 0 ||
        get_typed(qg_obj, &qg, -1, "hidden: q_g", 'q') < 0)
        goto done;
    Py_ssize_t m = qg.view.len / 8;
    if (get_typed(q0_obj, &q0, m, "hidden: q0", 'q') < 0 ||
        get_typed(q1_obj, &q1, m, "hidden: q1", 'q') < 0)
        goto done;
    const int64_t *S = s.view.buf, *E = e.view.buf, *QG = qg.view.buf;
    const int64_t *Q0 = q0.view.buf, *Q1 = q1.view.buf;
    const uint32_t *G = g.view.buf;
    const int32_t *P = p.view.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (P[i] < 0 || P[i] > 63) {
            PyErr_Format(PyExc_ValueError, "hidden: priority %d out of 0..63", (int)P[i]);
            goto done;
        }
    Py_ssize_t n_seg = 0;
    for (Py_ssize_t i = 0; i < n; i++)  /* an upper bound on the segments: the counted rows */
        n_seg += (mask >> P[i]) & 1;
    size_t cap = n_seg ? (size_t)n_seg : 1;
    seg_s = PyMem_RawMalloc(cap * sizeof(int64_t));
    seg_e = PyMem_RawMalloc(cap * sizeof(int64_t));
    before = PyMem_RawMalloc(cap * sizeof(int64_t));
    seg_g = PyMem_RawMalloc(cap * sizeof(uint32_t));
    result = PyBytes_FromStringAndSize(NULL, m * 8);
    if (!seg_s || !seg_e || !before || !seg_g || !result) {
        Py_CLEAR(result);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    uint64_t *out = (uint64_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t k = -1;
    int64_t run_end = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!((mask >> P[i]) & 1)) continue;
        if (k < 0 || S[i] > run_end) {
            if (k >= 0) seg_e[k] = run_end;
            k++;
            seg_s[k] = S[i];
            seg_g[k] = G[i];
            before[k] = (k == 0 || seg_g[k - 1] != G[i]) ? 0 :
                (int64_t)((uint64_t)before[k - 1] + ((uint64_t)seg_e[k - 1] -
                                                      (uint64_t)seg_s[k - 1]));
            run_end = (k == 0) ? E[i] : (E[i] > run_end ? E[i] : run_end);
        } else if (E[i] > run_end) {
            run_end = E[i];
        }
    }
    if (k >= 0) seg_e[k] = run_end;
    n_seg = k + 1;
    Py_ssize_t hint[2] = {-1, -1};
    for (Py_ssize_t j = 0; j < m; j++) {
        uint64_t cov[2] = {0, 0};
        int64_t t2[2] = {Q0[j], Q1[j]};
        for (int w = 0; w < 2 && QG[j] >= 0; w++) {
            Py_ssize_t at = last_at_or_before(seg_s, n_seg, t2[w], hint[w]);
            int64_t t = t2[w];
            hint[w] = at;
            if (at < 0 || (int64_t)seg_g[at] != QG[j]) continue;
            int64_t upto = t < seg_e[at] ? t : seg_e[at];
            uint64_t part = (uint64_t)upto - (uint64_t)seg_s[at];
            if ((int64_t)part < 0) part = 0;
            cov[w] = (uint64_t)before[at] + part;
        }
        out[j] = cov[1] - cov[0];
    }
    Py_END_ALLOW_THREADS
done:
    release(&s); release(&e); release(&g); release(&p);
    release(&qg); release(&q0); release(&q1);
    PyMem_RawFree(seg_s);
    PyMem_RawFree(seg_e);
    PyMem_RawFree(before);
    PyMem_RawFree(seg_g);
    return result;
}

/* ----------------------------------------------------------------------------------------
 * 5. The idle gaps and their pieces.
 * ---------------------------------------------------------------------------------------- */

#define IDLE_INF ((int64_t)1 << 62)

/* The four columns as a tuple, when the fill wrote as many rows as the count before it
 * found (else RuntimeError: cannot happen, the count and the fill make the same test). The
 * caller keeps and releases its references to out[0..4). */
static PyObject *four_columns(PyObject **out, Py_ssize_t written, Py_ssize_t total,
                              const char *what) {
    if (written != total) {
        PyErr_Format(PyExc_RuntimeError, "%s: %zd rows written, %zd counted", what, written,
                     total);
        return NULL;
    }
    return Py_BuildValue("(OOOO)", out[0], out[1], out[2], out[3]);
}

/* bytes objects of n int64 each, in out[0..k) (all or none) */
static int int64_outputs(PyObject **out, int k, Py_ssize_t n) {
    for (int i = 0; i < k; i++) {
        out[i] = PyBytes_FromStringAndSize(NULL, n * 8);
        if (!out[i]) {
            for (int j = 0; j < i; j++) Py_CLEAR(out[j]);
            return -1;
        }
    }
    return 0;
}

static PyObject *py_idle_gaps(PyObject *self, PyObject *args) {
    PyObject *s_obj, *e_obj, *g_obj, *sh_obj, *hi_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &s_obj, &e_obj, &g_obj, &sh_obj, &hi_obj))
        return NULL;
    buf_t s = {0}, e = {0}, g = {0}, sh = {0}, hi = {0};
    PyObject *out[4] = {NULL, NULL, NULL, NULL}, *result = NULL;
    if (get_typed(s_obj, &s, -1, "idle_gaps: s", 'q') < 0) goto done;
    Py_ssize_t n = s.view.len / 8;
    if (get_typed(e_obj, &e, n, "idle_gaps: e", 'q') < 0 ||
        get_typed(g_obj, &g, n, "idle_gaps: g", 'I') < 0 ||
        get_typed(sh_obj, &sh, -1, "idle_gaps: shift", 'q') < 0)
        goto done;
    Py_ssize_t n_dev = sh.view.len / 8;
    if (get_typed(hi_obj, &hi, n_dev, "idle_gaps: hi", 'q') < 0) goto done;
    const int64_t *S = s.view.buf, *E = e.view.buf, *SH = sh.view.buf, *HI = hi.view.buf;
    const uint32_t *G = g.view.buf;
    Py_ssize_t n_gaps = 0;
    int64_t reach = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((Py_ssize_t)G[i] >= n_dev || (i && G[i] < G[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "idle_gaps: groups out of range or order");
            goto done;
        }
        if (i == 0 || G[i] != G[i - 1] || S[i] > reach) n_gaps++;
        if (i == 0 || E[i] > reach) reach = E[i];
    }
    Py_ssize_t total = n_gaps + n_dev;
    if (int64_outputs(out, 4, total) < 0) goto done;
    int64_t *OG = (int64_t *)PyBytes_AS_STRING(out[0]), *OS = (int64_t *)PyBytes_AS_STRING(out[1]),
            *OE = (int64_t *)PyBytes_AS_STRING(out[2]), *OR = (int64_t *)PyBytes_AS_STRING(out[3]);
    Py_ssize_t j = 0, tail = 0;  /* next output; next group whose stretch is due */
    Py_BEGIN_ALLOW_THREADS
#define GAP(grp, a, b, row) do { if (j < total) { OG[j] = (grp); OS[j] = (a); OE[j] = (b); \
                                                  OR[j] = (row); } j++; } while (0)
    reach = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t d = G[i];
        int first = i == 0 || G[i] != G[i - 1];
        for (; first && tail < d; tail++)  /* the stretches of the groups before */
            GAP(tail, HI[tail], IDLE_INF, -1);
        if (first || S[i] > reach)
            GAP(d, first ? -IDLE_INF : (int64_t)((uint64_t)reach - (uint64_t)SH[d]),
                (int64_t)((uint64_t)S[i] - (uint64_t)SH[d]), i);
        if (i == 0 || E[i] > reach) reach = E[i];
    }
    for (; tail < n_dev; tail++)
        GAP(tail, HI[tail], IDLE_INF, -1);
#undef GAP
    Py_END_ALLOW_THREADS
    result = four_columns(out, j, total, "idle_gaps");
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(out[k]);
    release(&s); release(&e); release(&g); release(&sh); release(&hi);
    return result;
}

static PyObject *py_idle_pieces(PyObject *self, PyObject *args) {
    PyObject *g_obj, *s_obj, *e_obj, *l_obj, *h_obj;
    if (!PyArg_ParseTuple(args, "OOOOO", &g_obj, &s_obj, &e_obj, &l_obj, &h_obj))
        return NULL;
    buf_t g = {0}, s = {0}, e = {0}, l = {0}, h = {0};
    PyObject *out[4] = {NULL, NULL, NULL, NULL}, *result = NULL;
    if (get_typed(g_obj, &g, -1, "idle_pieces: g", 'q') < 0) goto done;
    Py_ssize_t n = g.view.len / 8;
    if (get_typed(s_obj, &s, n, "idle_pieces: start", 'q') < 0 ||
        get_typed(e_obj, &e, n, "idle_pieces: end", 'q') < 0 ||
        get_typed(l_obj, &l, n, "idle_pieces: l_end", 'q') < 0 ||
        get_typed(h_obj, &h, n, "idle_pieces: has", '?') < 0)
        goto done;
    const int64_t *G = g.view.buf, *S = s.view.buf, *E = e.view.buf, *L = l.view.buf;
    const uint8_t *H = h.view.buf;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (H[i]) {
            int64_t cut = L[i] > S[i] ? L[i] : S[i];
            if (cut > E[i]) cut = E[i];
            total += (cut > S[i]) + (E[i] > cut);
        } else {
            total += E[i] > S[i];
        }
    }
    if (int64_outputs(out, 4, total) < 0) goto done;
    int64_t *OG = (int64_t *)PyBytes_AS_STRING(out[0]), *OP = (int64_t *)PyBytes_AS_STRING(out[1]),
            *OS = (int64_t *)PyBytes_AS_STRING(out[2]), *OE = (int64_t *)PyBytes_AS_STRING(out[3]);
    Py_ssize_t j = 0;
    Py_BEGIN_ALLOW_THREADS
#define PIECE(part, a, b) do { if (j < total) { OG[j] = G[i]; OP[j] = (part); OS[j] = (a); \
                                                OE[j] = (b); } j++; } while (0)
    for (Py_ssize_t i = 0; i < n; i++) {
        if (H[i]) {
            int64_t cut = L[i] > S[i] ? L[i] : S[i];
            if (cut > E[i]) cut = E[i];
            if (cut > S[i]) PIECE(0, S[i], cut);
            if (E[i] > cut) PIECE(2, cut, E[i]);
        } else if (E[i] > S[i]) {
            PIECE(3, S[i], E[i]);
        }
    }
#undef PIECE
    Py_END_ALLOW_THREADS
    result = four_columns(out, j, total, "idle_pieces");
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(out[k]);
    release(&g); release(&s); release(&e); release(&l); release(&h);
    return result;
}

static PyMethodDef methods[] = {
    {"prio_sums", py_prio_sums, METH_VARARGS,
     "prio_sums(s, e, prio, runs, n_runs, n_cat, collective, memory) -> "
     "[(sums, counts, totals)] per layout"},
    {"solve", py_solve, METH_VARARGS,
     "solve(first, prev_lag, w, anchor, s_src, s_dst, s_start, s_lag, b_src, b_dst, b_lag, "
     "group, arrives, waits, a_lag, n_groups, out) -> 0 solved (every end in out), 1 not "
     "exact in one pass, 2 a cycle"},
    {"hidden", py_hidden, METH_VARARGS,
     "hidden(s, e, g, prio, compute, q_g, q0, q1) -> int64 bytes: per query, the compute "
     "time of its group in [q0, q1)"},
    {"idle_gaps", py_idle_gaps, METH_VARARGS,
     "idle_gaps(s, e, g, shift, hi) -> (gap_g, gap_s, gap_e, gap_row): int64 bytes"},
    {"idle_pieces", py_idle_pieces, METH_VARARGS,
     "idle_pieces(gap_g, gap_s, gap_e, l_end, has) -> (g, part, start, end): int64 bytes"},
    {"walk", py_walk, METH_VARARGS,
     "walk(s, e, b, b_bind, b_src, s_bind, s_src, s_at_start, prev_binds, group, a_last, comp, "
     "wait, edge_comp, prev_comp, idle, sink, w0, w1) -> (code, ns, on_node, on_ns, cut)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tracelens_sweep",
                                    "The timeline breakdown's one-pass sweep, the critical-path forward pass and walk, the compute time under collectives, and the idle gaps.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__tracelens_sweep(void) {
    PyObject *m = PyModule_Create(&module);
    /* ABI: prio_sums's arguments and results; WALK_ABI: walk's; SOLVE_ABI: solve's;
     * HIDDEN_ABI: hidden's; IDLE_ABI: idle_gaps' and idle_pieces' */
    if (m && (PyModule_AddIntConstant(m, "ABI", 1) < 0 ||
              PyModule_AddIntConstant(m, "HIDDEN_ABI", 1) < 0 ||
              PyModule_AddIntConstant(m, "IDLE_ABI", 1) < 0 ||
              PyModule_AddIntConstant(m, "WALK_ABI", 2) < 0 ||
              PyModule_AddIntConstant(m, "SOLVE_ABI", 1) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
