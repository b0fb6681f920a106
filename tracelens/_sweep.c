/* _tracelens_sweep: the one-pass interval sweep behind the timeline breakdown
 * (tracelens/analyze/timeline.py, _run_sums), in C.
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
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

static PyMethodDef methods[] = {
    {"prio_sums", py_prio_sums, METH_VARARGS,
     "prio_sums(s, e, prio, runs, n_runs, n_cat, collective, memory) -> "
     "[(sums, counts, totals)] per layout"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_tracelens_sweep",
                                    "One-pass interval sweeps of the timeline breakdown.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__tracelens_sweep(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
