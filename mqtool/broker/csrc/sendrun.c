/* The send hot path over one read's frames (mqtool/broker/fastsend.py's SendRun), one module:
 * mqtool.broker._sendrun.
 *
 *   send_run(bodies, i, j, ctx, answers) -> (taken, tally, zeros, slow, error)
 *
 * From bodies[i] on (up to bodies[j]), each SEND_MESSAGE_V2 frame that fast_send would take the way it takes most
 * (the store kernel's put) is answered here: what fast_send does, rule for rule,
 * in one C loop that calls the same compiled parts (the header reader, broker_properties, the
 * store's put_quick, the SEND_OK filler) and makes no Python frame. It stops at the first frame it
 * does not take and returns how many it took; their answer frames are appended to `answers` as
 * they are made (so a frame that raises leaves the ones before it answered). What the puts count
 * (a put the store kernel leaves to Python goes through ctx's slow_put, which counts it)
 * comes back for BrokerStats: tally {topic: [messages, bytes]}, the puts that took 0 ms, and the
 * others' times in ms; `error`, an exception the frame after the taken ones raised (the caller
 * answers that frame as the per-frame path answers an error), else None. It holds no state:
 * everything it reads comes in `ctx` (fastsend.run_context).
 * This module only glues; store and remoting code is reached through the callables it is given. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <time.h>

enum {                          /* ctx, a tuple made once per read by fastsend.run_context */
    C_FIELDS, C_PROPS, C_PUT, C_FILL, C_FRAME, C_STORE, C_QUICK, C_HOST_ROW, C_ID_PREFIX, C_MAX_BODY,
    C_DISPATCH_BATCH, C_MIN_BLANK, C_CLOCK, C_ON_DISPATCH, C_TOPICS, C_NAMES_OK, C_NOT_ALLOWED, C_ORDER_OK, C_CLUSTER,
    C_BORN, C_PARTS, C_SLOTS, C_PREFIX, C_RETRY, C_RANDOM, C_SLOW_PUT, C_SIZE
};
#define HEAD_AT 4
#define PERM_WRITE 2
#define MULTI_TAGS 0x2

static PyObject *zero, *s_pending, *s_perm, *s_order, *s_read_queues, *s_write_queues, *s_filter_type, *s_multi_tag;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long long int_attr(PyObject *o, PyObject *name, int *err)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) {
        *err = 1;
        return 0;
    }
    long long out = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (out == -1 && PyErr_Occurred())
        *err = 1;
    return out;
}

/* The topic's config where fast_send's _writable_topic takes a send to queue `queue_id`, a new
 * reference; NULL with no error where it does not (the caller stops), NULL with an error on one. */
static PyObject *writable_topic(PyObject *ctx, PyObject *topic, long long queue_id)
{
    int has = PySet_Contains(PyTuple_GET_ITEM(ctx, C_NAMES_OK), topic);
    if (has <= 0)
        return NULL;
    PyObject *cfg = PyDict_GetItemWithError(PyTuple_GET_ITEM(ctx, C_TOPICS), topic);
    if (!cfg)
        return NULL;
    Py_INCREF(cfg);
    has = PySet_Contains(PyTuple_GET_ITEM(ctx, C_NOT_ALLOWED), topic);
    if (has != 0)
        goto no;
    int err = 0;
    long long perm = int_attr(cfg, s_perm, &err), read_q = int_attr(cfg, s_read_queues, &err),
              write_q = int_attr(cfg, s_write_queues, &err);
    if (err)
        goto no;
    PyObject *order = PyObject_GetAttr(cfg, s_order);
    if (!order)
        goto no;
    int ordered = PyObject_IsTrue(order);
    Py_DECREF(order);
    if (ordered < 0 || !(perm & PERM_WRITE) || (ordered && !PyObject_IsTrue(PyTuple_GET_ITEM(ctx, C_ORDER_OK))) ||
            queue_id >= (read_q > write_q ? read_q : write_q))
        goto no;
    int retry = PyUnicode_Tailmatch(topic, PyTuple_GET_ITEM(ctx, C_RETRY), 0, PY_SSIZE_T_MAX, -1);
    if (retry != 0)
        goto no;
    return cfg;
no:
    Py_DECREF(cfg);
    return NULL;
}

/* A tally's entry for `topic` counted up by `n` messages of `nbytes`. */
static int tally_add(PyObject *tally, PyObject *topic, long long n, long long nbytes)
{
    PyObject *got = PyDict_GetItemWithError(tally, topic);
    long long had_n = 0, had_bytes = 0;
    if (got) {
        had_n = PyLong_AsLongLong(PyList_GET_ITEM(got, 0));
        had_bytes = PyLong_AsLongLong(PyList_GET_ITEM(got, 1));
    } else if (PyErr_Occurred()) {
        return -1;
    }
    PyObject *entry = Py_BuildValue("[LL]", had_n + n, had_bytes + nbytes);
    if (!entry)
        return -1;
    int rc = PyDict_SetItem(tally, topic, entry);
    Py_DECREF(entry);
    return rc;
}

/* One frame: its answer appended, 1; 0 where fast_send's per-frame path is to take it; -1 on error.
 * *topic_out (a new reference) and *size_out say what to count. */
static int one(PyObject *body, PyObject *ctx, PyObject *answers, PyObject **topic_out, long long *size_out,
               double *elapsed_ms)
{
    PyObject *const *c = &PyTuple_GET_ITEM(ctx, 0);
    PyObject *prefix = c[C_PREFIX];
    if (!PyBytes_CheckExact(body) || PyBytes_GET_SIZE(body) < HEAD_AT + PyBytes_GET_SIZE(prefix) ||
            memcmp(PyBytes_AS_STRING(body) + HEAD_AT, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix)))
        return 0;
    PyObject *fields = PyObject_CallOneArg(c[C_FIELDS], body);
    if (!fields)
        return -1;
    int rc = 0;
    PyObject *cfg = NULL, *props = NULL, *msg_body = NULL, *row = NULL, *put = NULL, *frame = NULL,
             *pending = NULL, *sys_obj = NULL, *filter = NULL, *picked = NULL;
    if (fields == Py_None || !PyTuple_Check(fields) || PyTuple_GET_SIZE(fields) != 9)
        goto out;
    PyObject *opaque = PyTuple_GET_ITEM(fields, 0), *topic = PyTuple_GET_ITEM(fields, 2),
             *text = PyTuple_GET_ITEM(fields, 3), *queue_obj = PyTuple_GET_ITEM(fields, 4);
    Py_ssize_t hlen = PyLong_AsSsize_t(PyTuple_GET_ITEM(fields, 1));
    long long queue_id = PyLong_AsLongLong(queue_obj), sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(fields, 5));
    if (PyErr_Occurred())
        goto fail;
    if (sys_flag & 0xC || !PyUnicode_Check(text) || !PyUnicode_Check(topic))
        goto out;
    Py_ssize_t text_len;
    const char *t = PyUnicode_AsUTF8AndSize(text, &text_len);
    if (!t) {
        PyErr_Clear();
        goto out;
    }
    for (const char *p = t; (p = memchr(p, '\x01', t + text_len - p)); p++) {    /* DELAY\1 or TRAN_MSG\1 */
        if ((p - t >= 5 && !memcmp(p - 5, "DELAY", 5)) || (p - t >= 8 && !memcmp(p - 8, "TRAN_MSG", 8)))
            goto out;
    }
    for (const char *p = t; (p = memchr(p, 'T', t + text_len - p)); p++) {    /* TIMER_: fast_send's rule */
        if (t + text_len - p >= 6 && !memcmp(p, "TIMER_", 6))
            goto out;
    }
    if (!(cfg = writable_topic(ctx, topic, queue_id))) {
        if (PyErr_Occurred())
            goto fail;
        goto out;
    }
    double start = now_s();
    if (queue_id < 0) {            /* the broker picks one: int(random() * (writeQueueNums or 1)) */
        int err = 0;
        long long write_q = int_attr(cfg, s_write_queues, &err);
        PyObject *r = err ? NULL : PyObject_CallNoArgs(c[C_RANDOM]);
        double x = r ? PyFloat_AsDouble(r) : -1;
        Py_XDECREF(r);
        if (PyErr_Occurred())
            goto fail;
        if (!(queue_obj = picked = PyLong_FromLongLong((long long)(x * (double)(write_q ? write_q : 1)))))
            goto fail;
    }
    if (!(filter = PyObject_GetAttr(cfg, s_filter_type)))
        goto fail;
    int multi = PyUnicode_Check(filter) && PyUnicode_Compare(filter, s_multi_tag) == 0;
    if (multi)
        sys_flag |= MULTI_TAGS;
    if (!(props = PyObject_CallFunctionObjArgs(c[C_PROPS], text, c[C_CLUSTER], NULL)))
        goto fail;
    if (!PyTuple_Check(props) || PyTuple_GET_SIZE(props) != 2) {
        PyErr_SetString(PyExc_TypeError, "send_run: broker_properties answers (dict, text)");
        goto fail;
    }
    if (hlen < 0 || HEAD_AT + hlen > PyBytes_GET_SIZE(body))
        goto out;
    if (!(msg_body = PyBytes_FromStringAndSize(PyBytes_AS_STRING(body) + HEAD_AT + hlen,
                                               PyBytes_GET_SIZE(body) - HEAD_AT - hlen)) ||
            !(sys_obj = PyLong_FromLongLong(sys_flag)))
        goto fail;
    /* (topic, queue id, sys flag, born host, born timestamp, reconsume times, prepared offset, body,
     *  properties text, properties, flag): the store's ROW_FIELDS */
    row = PyTuple_Pack(11, topic, queue_obj, sys_obj, c[C_BORN], PyTuple_GET_ITEM(fields, 7),
                       PyTuple_GET_ITEM(fields, 8), zero, msg_body, PyTuple_GET_ITEM(props, 1),
                       PyTuple_GET_ITEM(props, 0), PyTuple_GET_ITEM(fields, 6));
    if (!row || !(pending = PyObject_GetAttr(c[C_STORE], s_pending)))
        goto fail;
    PyObject *args[9] = {c[C_QUICK], pending, row, c[C_HOST_ROW], c[C_ID_PREFIX], c[C_MAX_BODY], c[C_DISPATCH_BATCH],
                         c[C_MIN_BLANK], c[C_CLOCK]};
    if (!(put = PyObject_Vectorcall(c[C_PUT], args, 9, NULL)))
        goto fail;
    if (put == Py_None) {
        /* Nothing written (a file to roll, a record put_one leaves to Python): as fast_send, the
         * general put of the same row, answered and counted there (slow_put). */
        PyObject *start_obj = PyFloat_FromDouble(start);
        if (!start_obj)
            goto fail;
        PyObject *slow[4] = {opaque, queue_obj, row, start_obj};
        frame = PyObject_Vectorcall(c[C_SLOW_PUT], slow, 4, NULL);
        Py_DECREF(start_obj);
        if (!frame || PyList_Append(answers, frame) < 0)
            goto fail;
        *size_out = -1;
        rc = 1;
        goto out;
    }
    if (!PyTuple_Check(put) || PyTuple_GET_SIZE(put) != 4) {
        PyErr_SetString(PyExc_TypeError, "send_run: put_quick answers (msg id, size, queue offset, dispatch)");
        goto fail;
    }
    /* Stored: from here on the frame is answered whatever happens. */
    long dispatch = PyLong_AsLong(PyTuple_GET_ITEM(put, 3));
    if (dispatch) {
        PyObject *r = PyObject_CallOneArg(c[C_ON_DISPATCH], PyTuple_GET_ITEM(put, 3));
        if (!r)
            goto fail;
        Py_DECREF(r);
    }
    PyObject *fill[6] = {c[C_PARTS], c[C_SLOTS], opaque, PyTuple_GET_ITEM(put, 0), queue_obj, PyTuple_GET_ITEM(put, 2)};
    if (!(frame = PyObject_Vectorcall(c[C_FILL], fill, 6, NULL)))
        goto fail;
    if (frame == Py_None) {
        Py_DECREF(frame);
        if (!(frame = PyObject_Vectorcall(c[C_FRAME], fill + 2, 4, NULL)))
            goto fail;
    }
    *elapsed_ms = (now_s() - start) * 1000;
    *size_out = PyLong_AsLongLong(PyTuple_GET_ITEM(put, 1));
    if (PyList_Append(answers, frame) < 0)
        goto fail;
    *topic_out = Py_NewRef(topic);
    rc = 1;
    goto out;
fail:
    rc = -1;
out:
    Py_DECREF(fields);
    Py_XDECREF(cfg);
    Py_XDECREF(filter);
    Py_XDECREF(picked);
    Py_XDECREF(props);
    Py_XDECREF(msg_body);
    Py_XDECREF(sys_obj);
    Py_XDECREF(row);
    Py_XDECREF(pending);
    Py_XDECREF(put);
    Py_XDECREF(frame);
    return rc;
}

static PyObject *send_run(PyObject *self, PyObject *args)
{
    PyObject *bodies, *ctx, *answers;
    Py_ssize_t i, j;
    if (!PyArg_ParseTuple(args, "O!nnO!O!", &PyList_Type, &bodies, &i, &j, &PyTuple_Type, &ctx, &PyList_Type, &answers))
        return NULL;
    if (PyTuple_GET_SIZE(ctx) != C_SIZE || !PyBytes_Check(PyTuple_GET_ITEM(ctx, C_PREFIX)) ||
            !PyDict_Check(PyTuple_GET_ITEM(ctx, C_TOPICS)) || !PyAnySet_Check(PyTuple_GET_ITEM(ctx, C_NAMES_OK)) ||
            !PyAnySet_Check(PyTuple_GET_ITEM(ctx, C_NOT_ALLOWED)) || !PyUnicode_Check(PyTuple_GET_ITEM(ctx, C_RETRY))) {
        PyErr_SetString(PyExc_TypeError, "send_run: ctx is fastsend.run_context's tuple");
        return NULL;
    }
    PyObject *tally = PyDict_New(), *slow = PyList_New(0), *last = NULL, *error = NULL;
    long long taken = 0, zeros = 0, last_n = 0, last_bytes = 0;
    if (!tally || !slow) {
        Py_XDECREF(tally);
        Py_XDECREF(slow);
        return NULL;
    }
    if (j > PyList_GET_SIZE(bodies))
        j = PyList_GET_SIZE(bodies);
    for (Py_ssize_t k = i < 0 ? 0 : i; k < j; k++) {
        PyObject *topic = NULL;
        long long size = 0;
        double elapsed = 0;
        int rc = one(PyList_GET_ITEM(bodies, k), ctx, answers, &topic, &size, &elapsed);
        if (rc == 0)
            break;
        if (rc > 0 && size < 0) {            /* answered and counted by slow_put */
            taken++;
        } else if (rc > 0) {
            taken++;
            if (last && topic != last && PyUnicode_Compare(topic, last) != 0) {
                if (tally_add(tally, last, last_n, last_bytes) < 0)
                    PyErr_Clear();     /* (only memory can fail: the put stays answered) */
                last_n = last_bytes = 0;
            }
            Py_XSETREF(last, topic);
            last_n++;
            last_bytes += size;
            long long ms = (long long)elapsed;        /* int() of a positive float: its floor */
            if (ms == 0) {
                zeros++;
            } else {
                PyObject *v = PyLong_FromLongLong(ms);
                if (!v || PyList_Append(slow, v) < 0)
                    PyErr_Clear();
                Py_XDECREF(v);
            }
        } else {
            /* The frame at i + taken failed: the caller answers it as
             * the per-frame path answers an error, and counts what was taken before it. */
            PyObject *type, *tb;
            PyErr_Fetch(&type, &error, &tb);
            PyErr_NormalizeException(&type, &error, &tb);
            if (error && tb)
                PyException_SetTraceback(error, tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            if (!error)
                error = Py_NewRef(Py_None);
            break;
        }
    }
    if (last && tally_add(tally, last, last_n, last_bytes) < 0)
        PyErr_Clear();             /* (only memory can fail here; the puts stay answered) */
    Py_XDECREF(last);
    return Py_BuildValue("(LNLNN)", taken, tally, zeros, slow, error ? error : Py_NewRef(Py_None));
}

static PyMethodDef methods[] = {
    {"send_run", send_run, METH_VARARGS, "One read's SEND_MESSAGE_V2 frames answered from bodies[i] on."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sendrun", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sendrun(void)
{
    if (!(zero = PyLong_FromLong(0)) || !(s_pending = PyUnicode_InternFromString("_pending")) || !(s_perm = PyUnicode_InternFromString("perm")) ||
            !(s_order = PyUnicode_InternFromString("order")) ||
            !(s_read_queues = PyUnicode_InternFromString("readQueueNums")) ||
            !(s_write_queues = PyUnicode_InternFromString("writeQueueNums")) ||
            !(s_filter_type = PyUnicode_InternFromString("topicFilterType")) ||
            !(s_multi_tag = PyUnicode_InternFromString("MULTI_TAG")))
        return NULL;
    return PyModule_Create(&module);
}
