/* A producer's batch no one waits for, put as one run (MessageStore.put_run_quick with the store
 * kernel): _append's run branch under the put lock, the append listeners told and the batch's
 * message ids made, in one call. */
#include "kernel.h"

static PyObject *s_topic, *s_queue_id, *s_total, *s_frame, *s_spans, *s_outer, *s_flags, *s_row, *s_topic_part,
                *s_raw_sizes, *s_crcs, *s_sizes, *s_placed;

int quickrun_init(void)
{
    return (s_topic = PyUnicode_InternFromString("topic")) && (s_queue_id = PyUnicode_InternFromString("queue_id")) &&
           (s_total = PyUnicode_InternFromString("total")) && (s_frame = PyUnicode_InternFromString("frame")) &&
           (s_spans = PyUnicode_InternFromString("spans")) && (s_outer = PyUnicode_InternFromString("outer")) &&
           (s_flags = PyUnicode_InternFromString("flags")) && (s_row = PyUnicode_InternFromString("row")) &&
           (s_topic_part = PyUnicode_InternFromString("topic_part")) &&
           (s_raw_sizes = PyUnicode_InternFromString("raw_sizes")) && (s_crcs = PyUnicode_InternFromString("crcs")) &&
           (s_sizes = PyUnicode_InternFromString("sizes")) && (s_placed = PyUnicode_InternFromString("placed")) ? 0 : -1;
}

enum {R_TOPIC, R_QUEUE_ID, R_TOTAL, R_FRAME, R_SPANS, R_OUTER, R_FLAGS, R_ROW, R_TOPIC_PART, R_RAW_SIZES, R_CRCS,
      R_SIZES, R_N};

/* The run's fields (new references), or -1 with an error set. */
static int run_fields(PyObject *run, PyObject **f)
{
    PyObject *const name[R_N] = {s_topic, s_queue_id, s_total, s_frame, s_spans, s_outer, s_flags, s_row,
                                 s_topic_part, s_raw_sizes, s_crcs, s_sizes};
    for (int k = 0; k < R_N; k++)
        if (!(f[k] = PyObject_GetAttr(run, name[k])))
            return -1;
    if (!PyUnicode_Check(f[R_TOPIC]) || !PyLong_Check(f[R_QUEUE_ID]) || !PyLong_Check(f[R_TOTAL]) ||
            !PyBytes_Check(f[R_RAW_SIZES])) {
        PyErr_SetString(PyExc_TypeError, "put_run_quick: the run is not a FrameRun");
        return -1;
    }
    return 0;
}

/* put_run_quick(state, pending, run, id_prefix, dispatch_runs, min_blank, clock)
 *   -> (msg_ids, queue_offset, dispatch) | None
 * state is put_quick's. Under the put lock, the run (a FrameRun: recordrun.batch_run) is placed at
 * the write position of the last commit log file, before its pre-write and its last `min_blank`
 * bytes, with the store time now (as put_quick takes it): its queue offsets taken from the topic
 * queue table, its records written (frame_write), one pending item queued for dispatch, the
 * file's write position and store timestamp moved on. `dispatch`: 1 when `pending` holds
 * `dispatch_runs` items or more (the caller dispatches them), 2 when it holds only this one (the
 * caller may wake the dispatcher), else 0. After the lock: each append listener called with the
 * commit log offset the run ends at, and the records' message ids (id_prefix + offset, 16 hex
 * digits) joined by commas, as a SEND_BATCH_MESSAGE answer carries them. None, with nothing
 * written, where _append would roll the file or wait for the pre-write (the Python path). */
PyObject *put_run_quick(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 6 || !PyList_Check(args[1]) ||
            !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "put_run_quick(state, pending, run, id_prefix, dispatch_runs, min_blank, clock)");
        return NULL;
    }
    PyObject *state = args[0], *pending = args[1], *run = args[2];
    PyObject *lock = PyTuple_GET_ITEM(state, 0), *files = PyTuple_GET_ITEM(state, 1),
             *table = PyTuple_GET_ITEM(state, 4), *listeners = PyTuple_GET_ITEM(state, 5);
    Py_ssize_t dispatch_runs = PyLong_AsSsize_t(args[4]), min_blank = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_Check(files) || !PyList_Check(listeners) || !PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "put_run_quick: the files and the listeners are lists, the table a dict");
        return NULL;
    }
    Py_ssize_t prefix_len;
    const char *prefix = PyUnicode_AsUTF8AndSize(args[3], &prefix_len);
    if (!prefix)
        return NULL;
    if ((Py_ssize_t)strlen(prefix) != prefix_len || !PyUnicode_IS_ASCII(args[3])) {
        PyErr_SetString(PyExc_ValueError, "put_run_quick: the id prefix must be ASCII (hex digits)");
        return NULL;
    }
    PyObject *f[R_N] = {0}, *key = NULL, *result = NULL;
    if (run_fields(run, f) < 0)
        goto clear;
    long long total = PyLong_AsLongLong(f[R_TOTAL]);
    Py_ssize_t n = PyBytes_GET_SIZE(f[R_RAW_SIZES]) / 8;
    if (PyErr_Occurred() || n < 1 || !(key = PyTuple_Pack(2, f[R_TOPIC], f[R_QUEUE_ID])))
        goto clear;
    if (quick_lock(lock) < 0)
        goto clear;
    struct quick_tail t;
    PyObject *written = NULL, *item = NULL, *offset_obj = NULL;
    long long store_ts, queue_offset = 0, end = 0, phys = 0;
    int dispatch = 0, done = 0;
    if (quick_tail(files, &t) <= 0)
        goto unlock;
    if (total + min_blank > t.size - t.pos || t.pos + total > t.warm_lo)
        goto unlock;                               /* the roll or the pre-write wait: _append */
    if ((store_ts = quick_clock(args[6])) < 0)
        goto unlock;
    PyObject *held = PyDict_GetItemWithError(table, key);
    if (held) {
        queue_offset = PyLong_AsLongLong(held);
        if (queue_offset == -1 && PyErr_Occurred())
            goto unlock;
    } else if (PyErr_Occurred()) {
        goto unlock;
    }
    phys = t.start + t.pos;
    PyObject *placed = Py_BuildValue("(LLL)", phys, queue_offset, store_ts);
    if (!placed || PyObject_SetAttr(run, s_placed, placed) < 0) {
        Py_XDECREF(placed);
        goto unlock;
    }
    Py_DECREF(placed);
    PyObject *write_args = Py_BuildValue("(OOOOOnOOOOLLL)", f[R_FRAME], f[R_SPANS], f[R_OUTER], f[R_FLAGS], t.mm,
                                         (Py_ssize_t)t.pos, f[R_ROW], f[R_TOPIC_PART], f[R_RAW_SIZES], f[R_CRCS],
                                         phys, queue_offset, store_ts);
    written = write_args ? frame_write(NULL, write_args) : NULL;
    Py_XDECREF(write_args);
    if (!written)
        goto unlock;
    /* The records are written: the table, the pending list and the positions move on. */
    if (!(offset_obj = PyLong_FromLongLong(queue_offset + n)) || PyDict_SetItem(table, key, offset_obj) < 0)
        goto unlock;
    Py_ssize_t was = PyList_GET_SIZE(pending);
    item = Py_BuildValue("(OOOLLLLiO)", f[R_TOPIC], f[R_QUEUE_ID], run, phys, total, queue_offset, store_ts, 0,
                         f[R_SIZES]);
    if (!item || PyList_Append(pending, item) < 0 || quick_moved(t.file, t.pos + total, store_ts) < 0)
        goto unlock;
    end = phys + total;
    dispatch = was + 1 >= dispatch_runs ? 1 : was == 0 ? 2 : 0;
    done = 1;
unlock:
    Py_XDECREF(written);
    Py_XDECREF(item);
    Py_XDECREF(offset_obj);
    quick_tail_clear(&t);
    if (quick_unlock(lock) < 0 || PyErr_Occurred())
        goto clear;
    if (!done) {
        result = Py_NewRef(Py_None);
        goto clear;
    }
    if (quick_told(listeners, end) < 0)
        goto clear;
    PyObject *ids = PyUnicode_New(n * (prefix_len + 17) - 1, 127);
    if (!ids)
        goto clear;
    char *d = (char *)PyUnicode_DATA(ids);
    const int64_t *size_at = (const int64_t *)PyBytes_AS_STRING(f[R_RAW_SIZES]);
    for (Py_ssize_t i = 0; i < n; i++) {
        quick_id(d, prefix, prefix_len, (unsigned long long)phys);
        d += prefix_len + 16;
        if (i + 1 < n)
            *d++ = ',';
        phys += size_at[i];
    }
    result = Py_BuildValue("(NLi)", ids, queue_offset, dispatch);
clear:
    for (int k = 0; k < R_N; k++)
        Py_XDECREF(f[k]);
    Py_XDECREF(key);
    return result;
}
