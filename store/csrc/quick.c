/* A single put no one waits for (MessageStore.put_quick with the store kernel): _put_kernel's
 * lock, file and clock around put_one, the append listeners told and the message id made, in one call. */
#include "kernel.h"
#include <time.h>

static PyObject *s_acquire, *s_release, *s_write_pos, *s_size, *s_warm_lo, *s_start, *s_mm, *s_store_timestamp;

int quick_init(void)
{
    return (s_acquire = PyUnicode_InternFromString("acquire")) && (s_release = PyUnicode_InternFromString("release")) &&
           (s_write_pos = PyUnicode_InternFromString("write_pos")) && (s_size = PyUnicode_InternFromString("size")) &&
           (s_warm_lo = PyUnicode_InternFromString("warm_lo")) && (s_start = PyUnicode_InternFromString("start")) &&
           (s_mm = PyUnicode_InternFromString("mm")) &&
           (s_store_timestamp = PyUnicode_InternFromString("store_timestamp")) ? 0 : -1;
}

/* An int attribute of a mapped file; -1 with an error set when it is not there. */
long long int_attr(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v)
        return -1;
    long long out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    return out;
}

int set_int_attr(PyObject *o, PyObject *name, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (!v)
        return -1;
    int rc = PyObject_SetAttr(o, name, v);
    Py_DECREF(v);
    return rc;
}

/* The commit log's last file as a quick put finds it (the put lock held): 1 with `t` filled, 0
 * where there is none or it is full (last_for_append would roll it: the Python path), -1 on error. */
int quick_tail(PyObject *files, struct quick_tail *t)
{
    t->file = t->mm = NULL;
    Py_ssize_t n = PyList_GET_SIZE(files);
    if (n == 0)
        return 0;
    t->file = Py_NewRef(PyList_GET_ITEM(files, n - 1));
    t->pos = int_attr(t->file, s_write_pos);
    t->size = int_attr(t->file, s_size);
    t->warm_lo = int_attr(t->file, s_warm_lo);
    t->start = int_attr(t->file, s_start);
    if (PyErr_Occurred() || !(t->mm = PyObject_GetAttr(t->file, s_mm)))
        return -1;
    return t->pos < t->size;
}

void quick_tail_clear(struct quick_tail *t)
{
    Py_CLEAR(t->mm);
    Py_CLEAR(t->file);
}

/* The store time now, in ms: clock() when clock is not None, else the real-time clock's; -1 on error. */
long long quick_clock(PyObject *clock)
{
    if (clock == Py_None) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    }
    PyObject *ms = PyObject_CallNoArgs(clock);
    long long v = ms ? PyLong_AsLongLong(ms) : -1;
    Py_XDECREF(ms);
    return PyErr_Occurred() ? -1 : v;
}

/* The put lock taken (0) or not (-1, an error set). */
int quick_lock(PyObject *lock)
{
    PyObject *got = PyObject_CallMethodNoArgs(lock, s_acquire);
    Py_XDECREF(got);
    return got ? 0 : -1;
}

/* The put lock released, an error already set kept: 0, or -1 where the release itself failed. */
int quick_unlock(PyObject *lock)
{
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyObject *released = PyObject_CallMethodNoArgs(lock, s_release);
    if (!released) {
        Py_XDECREF(type);
        Py_XDECREF(val);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(released);
    PyErr_Restore(type, val, tb);
    return 0;
}

/* The file's write position and store timestamp moved on past a put. */
int quick_moved(PyObject *file, long long pos, long long store_ts)
{
    return set_int_attr(file, s_write_pos, pos) < 0 || set_int_attr(file, s_store_timestamp, store_ts) < 0 ? -1 : 0;
}

/* Each append listener called with the commit log offset the put ends at: 0, or -1 on error. */
int quick_told(PyObject *listeners, long long end)
{
    PyObject *at = PyLong_FromLongLong(end);
    if (!at)
        return -1;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(listeners); k++) {
        PyObject *listener = Py_NewRef(PyList_GET_ITEM(listeners, k));
        PyObject *r = PyObject_CallOneArg(listener, at);
        Py_DECREF(listener);
        if (!r) {
            Py_DECREF(at);
            return -1;
        }
        Py_DECREF(r);
    }
    Py_DECREF(at);
    return 0;
}

/* A message id: prefix (ASCII, checked by the caller) + the offset in 16 hex digits, at d. */
void quick_id(char *d, const char *prefix, Py_ssize_t prefix_len, unsigned long long phys)
{
    memcpy(d, prefix, prefix_len);
    for (int k = 15; k >= 0; k--, phys >>= 4)
        d[prefix_len + k] = "0123456789ABCDEF"[phys & 15];
}

/* put_quick(state, pending, row, store_host, id_prefix, max_body, dispatch_batch, min_blank, clock)
 *   -> (msg_id, size, queue_offset, dispatch) | None
 * state is (put_lock, commit log files, topic_fields, crc, table, append_listeners): the store's own
 * containers, made once. Under the put lock, the row (put_one's) is put at the write position of the
 * last commit log file, before its pre-write and its last `min_blank` bytes, with the store time
 * now (ms: clock() when clock is not None, else the real-time clock's); the file's write position and store timestamp move on. `dispatch` is 1 when `pending`
 * holds `dispatch_batch` records or more (the caller dispatches them), 2 when it holds only this one
 * (the caller may wake the dispatcher), else 0. After the lock: each append listener called with
 * the commit log offset the record ends at, and the message id made (id_prefix + offset, 16 hex digits).
 * None, with nothing written, where _put_kernel would roll the file or the Python path decides. */
PyObject *put_quick(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyTuple_Check(args[0]) || PyTuple_GET_SIZE(args[0]) != 6 || !PyList_Check(args[1]) ||
            !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "put_quick(state, pending, row, store_host, id_prefix, max_body, "
                                         "dispatch_batch, min_blank, clock)");
        return NULL;
    }
    PyObject *state = args[0], *pending = args[1];
    PyObject *lock = PyTuple_GET_ITEM(state, 0), *files = PyTuple_GET_ITEM(state, 1),
             *listeners = PyTuple_GET_ITEM(state, 5);
    Py_ssize_t dispatch_batch = PyLong_AsSsize_t(args[6]), min_blank = PyLong_AsSsize_t(args[7]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyList_Check(files) || !PyList_Check(listeners)) {
        PyErr_SetString(PyExc_TypeError, "put_quick: the files and the listeners are lists");
        return NULL;
    }
    Py_ssize_t prefix_len;
    const char *prefix = PyUnicode_AsUTF8AndSize(args[4], &prefix_len);
    if (!prefix)
        return NULL;
    if (prefix_len > 100) {
        PyErr_SetString(PyExc_ValueError, "put_quick: the id prefix is too long");
        return NULL;
    }
    if (quick_lock(lock) < 0)
        return NULL;
    struct quick_tail t;
    PyObject *placed = NULL, *call[12] = {0};
    long long end = 0, queue_offset = 0, size = 0, store_ts;
    int dispatch = 0, done = 0;
    if (quick_tail(files, &t) <= 0 || (store_ts = quick_clock(args[8])) < 0)
        goto unlock;
    long long room = t.size - min_blank < t.warm_lo ? t.size - min_blank : t.warm_lo;
    call[0] = args[2];
    call[1] = t.mm;
    call[6] = PyTuple_GET_ITEM(state, 2);
    call[7] = args[3];
    call[8] = PyTuple_GET_ITEM(state, 3);
    call[9] = args[5];
    call[10] = PyTuple_GET_ITEM(state, 4);
    call[11] = pending;
    if (!(call[2] = PyLong_FromLongLong(t.pos)) || !(call[3] = PyLong_FromLongLong(room)) ||
            !(call[4] = PyLong_FromLongLong(t.start + t.pos)) || !(call[5] = PyLong_FromLongLong(store_ts)))
        goto unlock;
    placed = put_one(NULL, call, 12);
    if (!placed || placed == Py_None)
        goto unlock;
    size = PyLong_AsLongLong(PyTuple_GET_ITEM(placed, 0));
    queue_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(placed, 1));
    /* The record is written and queued: the positions move on whatever follows. */
    if (quick_moved(t.file, t.pos + size, store_ts) < 0)
        goto unlock;
    end = t.start + t.pos + size;
    Py_ssize_t queued = PyList_GET_SIZE(pending);
    dispatch = queued >= dispatch_batch ? 1 : queued == 1 ? 2 : 0;
    done = 1;
unlock:
    for (int k = 2; k < 6; k++)
        Py_XDECREF(call[k]);
    Py_XDECREF(placed);
    quick_tail_clear(&t);
    if (quick_unlock(lock) < 0 || PyErr_Occurred())
        return NULL;
    if (!done)
        Py_RETURN_NONE;
    if (quick_told(listeners, end) < 0)
        return NULL;
    char id[128];
    quick_id(id, prefix, prefix_len, (unsigned long long)(end - size));
    PyObject *msg_id = PyUnicode_FromStringAndSize(id, prefix_len + 16);
    if (!msg_id)
        return NULL;
    return Py_BuildValue("(NLLi)", msg_id, size, queue_offset, dispatch);
}
