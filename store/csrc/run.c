/* A batch put as a run (store/recordrun.py KernelRun): prepared before the put lock, written under it. */
#include "kernel.h"

/* run_prepare(msgs, max_body, fixed, crc) -> (total, sizes, crcs, props, parts, flags) | None
 * sizes: native int64 per record, crcs: native int32 (masked to 31 bits), props: each message's
 * properties dict, parts: [body, properties text] per record in one list, flags: native int32.
 * None when the messages are not a run for this path: a shared field differs, a body is not
 * bytes or longer than max_body, a properties text is missing or longer than 32767 bytes, a
 * properties dict is empty (the caller's Python path fills those in), a flag is not a Java int. */
PyObject *run_prepare(PyObject *self, PyObject *args)
{
    PyObject *msgs, *crc;
    Py_ssize_t max_body, fixed;
    if (!PyArg_ParseTuple(args, "O!nnO", &PyList_Type, &msgs, &max_body, &fixed, &crc))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    if (n == 0)
        Py_RETURN_NONE;
    PyObject *first[N_SHARED] = {0};
    PyObject *sizes = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *crcs = PyBytes_FromStringAndSize(NULL, n * 4);
    PyObject *props = PyList_New(n);
    PyObject *parts = PyList_New(2 * n);
    PyObject *flags = PyBytes_FromStringAndSize(NULL, n * 4);
    PyObject *result = NULL;
    if (!sizes || !crcs || !props || !parts || !flags)
        goto done;
    int64_t *size_at = (int64_t *)PyBytes_AS_STRING(sizes);
    int32_t *crc_at = (int32_t *)PyBytes_AS_STRING(crcs);
    int32_t *flag_at = (int32_t *)PyBytes_AS_STRING(flags);
    long long total = 0;
    for (int k = 0; k < N_SHARED; k++) {
        first[k] = PyObject_GetAttr(PyList_GET_ITEM(msgs, 0), shared_names[k]);
        if (!first[k])
            goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        if (i > 0) {
            for (int k = 0; k < N_SHARED; k++) {
                PyObject *v = PyObject_GetAttr(m, shared_names[k]);
                if (!v)
                    goto done;
                int same = PyObject_RichCompareBool(v, first[k], Py_EQ);
                Py_DECREF(v);
                if (same < 0)
                    goto done;
                if (!same)
                    goto not_a_run;
            }
        }
        PyObject *d = PyObject_GetAttr(m, s_props);
        if (!d)
            goto done;
        PyList_SET_ITEM(props, i, d);
        if (!PyDict_Check(d) || PyDict_GET_SIZE(d) == 0)
            goto not_a_run;
        PyObject *body = PyObject_GetAttr(m, s_body);
        if (!body)
            goto done;
        PyObject *text = PyObject_GetAttr(m, s_text);
        if (!text) {
            Py_DECREF(body);
            goto done;
        }
        PyList_SET_ITEM(parts, 2 * i, body);
        PyList_SET_ITEM(parts, 2 * i + 1, text);
        Py_ssize_t body_len = PyBytes_Check(body) ? PyBytes_GET_SIZE(body) : -1;
        Py_ssize_t text_len = -1;
        if (PyUnicode_Check(text) && !PyUnicode_AsUTF8AndSize(text, &text_len))
            goto done;
        if (body_len < 0 || body_len > max_body || text_len < 0 || text_len > MAX_PROPS)
            goto not_a_run;
        PyObject *flag = PyObject_GetAttr(m, s_flag);
        if (!flag)
            goto done;
        long long flag_value;
        int ok = java_int(flag, INT32_MIN, INT32_MAX, &flag_value);
        Py_DECREF(flag);
        if (ok < 0)
            goto done;
        if (!ok)
            goto not_a_run;                 /* the general path refuses it as struct.pack does */
        flag_at[i] = (int32_t)flag_value;
        PyObject *c = PyObject_CallOneArg(crc, body);
        if (!c)
            goto done;
        unsigned long v = PyLong_AsUnsignedLongMask(c);
        Py_DECREF(c);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto done;
        crc_at[i] = (int32_t)(v & 0x7FFFFFFF);
        size_at[i] = fixed + body_len + text_len;
        total += size_at[i];
    }
    result = Py_BuildValue("LOOOOO", total, sizes, crcs, props, parts, flags);
    goto done;
not_a_run:
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < N_SHARED; k++)
        Py_XDECREF(first[k]);
    Py_XDECREF(sizes);
    Py_XDECREF(crcs);
    Py_XDECREF(props);
    Py_XDECREF(parts);
    Py_XDECREF(flags);
    return result;
}

struct piece {
    const char *body;
    Py_ssize_t body_len;
    const char *text;
    Py_ssize_t text_len;
};

/* run_write(parts, flags, buf, pos, row, topic_part, sizes, crcs, phys, queue_offset, store_ts)
 * Writes the run at buf[pos:]: per record the 88-byte row with its size, CRC, flag, queue offset,
 * commit log offset, store time and body length filled in, the body, topic_part (TOPICLENGTH +
 * TOPIC), PROPERTIESLENGTH and the properties. parts, flags, sizes and crcs are run_prepare's. */
PyObject *run_write(PyObject *self, PyObject *args)
{
    PyObject *parts, *buf_obj;
    Py_ssize_t pos;
    Py_buffer row, topic, sizes, crcs, flags;
    long long phys, queue_offset, store_ts;
    if (!PyArg_ParseTuple(args, "O!y*Ony#y#y*y*LLL", &PyList_Type, &parts, &flags, &buf_obj, &pos, &row.buf,
                          &row.len, &topic.buf, &topic.len, &sizes, &crcs, &phys, &queue_offset, &store_ts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(parts) / 2;
    PyObject *result = NULL;
    struct piece *pieces = NULL;
    Py_buffer buf = {0};
    const int32_t *flag_at = flags.buf;
    if (row.len != FIXED_SIZE || PyList_GET_SIZE(parts) != 2 * n || sizes.len != n * 8 || crcs.len != n * 4 ||
            flags.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "run_write: row, sizes, crcs or flags do not match the records");
        goto release;
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        goto release;
    const int64_t *size_at = sizes.buf;
    const int32_t *crc_at = crcs.buf;
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += size_at[i];
    if (pos < 0 || pos + total > buf.len) {
        PyErr_SetString(PyExc_ValueError, "run_write: the run does not fit the buffer");
        goto release;
    }
    pieces = PyMem_Malloc(n ? n * sizeof *pieces : 1);
    if (!pieces) {
        PyErr_NoMemory();
        goto release;
    }
    /* Borrow each body and properties text (the list keeps them alive). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = PyList_GET_ITEM(parts, 2 * i), *text = PyList_GET_ITEM(parts, 2 * i + 1);
        int ok = PyBytes_Check(body) && PyUnicode_Check(text);
        if (ok) {
            pieces[i].body = PyBytes_AS_STRING(body);
            pieces[i].body_len = PyBytes_GET_SIZE(body);
            pieces[i].text = PyUnicode_AsUTF8AndSize(text, &pieces[i].text_len);
            ok = pieces[i].text &&
                 size_at[i] == FIXED_SIZE + topic.len + 2 + pieces[i].body_len + pieces[i].text_len;
        }
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "run_write: a record's parts do not match its size");
            goto release;
        }
    }
    unsigned char *out = (unsigned char *)buf.buf + pos;
    /* The GIL stays held: given up around a copy this short, it came back only after the
     * dispatch thread's next switch interval (measured slower). */
    long long at = phys;
    for (Py_ssize_t i = 0; i < n; i++) {
        struct piece *p = &pieces[i];
        put_head(out, row.buf, size_at[i], crc_at[i], flag_at[i], queue_offset + i, at, store_ts, p->body_len);
        unsigned char *q = out + FIXED_SIZE;
        memcpy(q, p->body, p->body_len);
        q += p->body_len;
        memcpy(q, topic.buf, topic.len);
        q += topic.len;
        q[0] = (unsigned char)(p->text_len >> 8);
        q[1] = (unsigned char)p->text_len;
        memcpy(q + 2, p->text, p->text_len);
        out += size_at[i];
        at += size_at[i];
    }
    result = Py_NewRef(Py_None);
release:
    PyMem_Free(pieces);
    if (buf.obj)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&crcs);
    PyBuffer_Release(&flags);
    return result;
}

/* msg_ids(prefix, phys, sizes) -> [prefix + "%016X" % offset, ...] for the run's records. */
PyObject *msg_ids(PyObject *self, PyObject *args)
{
    const char *prefix;
    Py_ssize_t prefix_len;
    long long phys;
    Py_buffer sizes;
    if (!PyArg_ParseTuple(args, "s#Ly*", &prefix, &prefix_len, &phys, &sizes))
        return NULL;
    Py_ssize_t n = sizes.len / 8;
    const int64_t *size_at = sizes.buf;
    for (Py_ssize_t k = 0; k < prefix_len; k++)
        if ((unsigned char)prefix[k] > 127) {
            PyErr_SetString(PyExc_ValueError, "msg_ids: the prefix must be ASCII (hex digits)");
            PyBuffer_Release(&sizes);
            return NULL;
        }
    PyObject *ids = PyList_New(n);
    static const char hex[] = "0123456789ABCDEF";
    for (Py_ssize_t i = 0; ids && i < n; i++) {
        PyObject *s = PyUnicode_New(prefix_len + 16, 127);
        if (!s) {
            Py_CLEAR(ids);
            break;
        }
        char *d = (char *)PyUnicode_DATA(s);
        memcpy(d, prefix, prefix_len);
        uint64_t v = (uint64_t)phys;
        for (int k = 15; k >= 0; k--, v >>= 4)
            d[prefix_len + k] = hex[v & 15];
        PyList_SET_ITEM(ids, i, s);
        phys += size_at[i];
    }
    PyBuffer_Release(&sizes);
    return ids;
}
