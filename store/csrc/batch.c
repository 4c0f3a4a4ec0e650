/* A producer's batch body (SEND_BATCH_MESSAGE, MessageDecoder.decodeMessages) read into the
 * entries a batch put stores, in one pass (the broker's send.py; its Python path is the reference). */
#include "kernel.h"

/* One entry of a batch body at b[*p..end): its flag, body and merged, parsed properties.
 * 1 with *p moved past it, 0 when the body is not well formed there, -1 on error. */
struct entry {
    int32_t flag;
    const unsigned char *body;
    Py_ssize_t body_len;
    PyObject *text, *props;      /* new references */
};

static int next_entry(const unsigned char *b, Py_ssize_t *p, Py_ssize_t end, PyObject *outer, PyObject *joined,
                      struct entry *e)
{
    Py_ssize_t at0 = *p;
    if (at0 + 20 > end)
        return 0;
    int32_t total = get32(b + at0), blen = get32(b + at0 + 16);
    Py_ssize_t q = at0 + 20;
    if (blen < 0 || q + blen + 2 > end || total < 22 || at0 + total > end)
        return 0;
    int16_t plen = (int16_t)((uint16_t)b[q + blen] << 8 | b[q + blen + 1]);
    Py_ssize_t at = q + blen + 2;
    if (plen < 0 || at + plen > end)
        return 0;
    PyObject *inner = PyUnicode_DecodeUTF8((const char *)b + at, plen, "replace");
    if (!inner)
        return -1;
    PyObject *text;
    Py_ssize_t n = PyUnicode_GET_LENGTH(inner);
    if (!joined) {
        text = inner;
    } else {
        int glue = n > 0 && PyUnicode_READ_CHAR(inner, n - 1) != 0x02;
        text = PyUnicode_Concat(inner, glue ? joined : outer);
        Py_DECREF(inner);
        if (!text)
            return -1;
    }
    PyObject *props = parse_properties(NULL, text);
    if (!props) {
        Py_DECREF(text);
        return -1;
    }
    e->flag = get32(b + at0 + 12);
    e->body = b + q;
    e->body_len = blen;
    e->text = text;
    e->props = props;
    *p = at0 + total;
    return 1;
}

/* "\x02" + outer, or NULL with no error when outer is empty (nothing is merged). */
static int glue_of(PyObject *outer, PyObject **joined)
{
    *joined = NULL;
    if (PyUnicode_GET_LENGTH(outer) == 0)
        return 0;
    *joined = PyUnicode_FromFormat("\x02%U", outer);
    return *joined ? 0 : -1;
}

/* batch_entries(body, outer) -> [(flag, body, properties text, properties dict), ...] | None
 * Each entry of the body (total int32, magic int32, crc int32, flag int32, body length int32, body,
 * properties length int16, properties UTF-8) with the batch-level properties `outer` merged after its
 * own (one 0x02 between, unless the entry's text is empty or already ends with one, or `outer` is
 * empty) and the merged text parsed. None when the body is not well formed: the Python path then
 * words the refusal. (read_batch does the work; batch_entries, at the end, parses the arguments.) */
static PyObject *read_batch(Py_buffer buf, PyObject *outer)
{
    PyObject *out = PyList_New(0), *joined = NULL;
    const unsigned char *b = (const unsigned char *)buf.buf;
    Py_ssize_t p = 0;
    if (!out || glue_of(outer, &joined) < 0)
        goto fail;
    while (p < buf.len) {
        struct entry e;
        int got = next_entry(b, &p, buf.len, outer, joined, &e);
        if (got < 0)
            goto fail;
        if (got == 0)
            goto none;
        PyObject *data = PyBytes_FromStringAndSize((const char *)e.body, e.body_len);
        PyObject *item = data ? Py_BuildValue("(iOOO)", e.flag, data, e.text, e.props) : NULL;
        Py_XDECREF(data);
        Py_DECREF(e.text);
        Py_DECREF(e.props);
        if (!item)
            goto fail;
        int bad = PyList_Append(out, item);
        Py_DECREF(item);
        if (bad)
            goto fail;
    }
    Py_XDECREF(joined);
    PyBuffer_Release(&buf);
    return out;
none:
    Py_XDECREF(joined);
    Py_DECREF(out);
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(joined);
    Py_XDECREF(out);
    PyBuffer_Release(&buf);
    return NULL;
}

PyObject *batch_entries(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *outer;
    if (!PyArg_ParseTuple(args, "y*U", &buf, &outer))
        return NULL;
    return read_batch(buf, outer);
}

/* batch_run(frame, at, outer, max_body, fixed, crc, min_count)
 *     -> (total, sizes, crcs, props, parts, flags) | None
 * The batch body that starts at frame[at] read straight into what run_prepare answers for the
 * messages the broker would make of it (send.py's _send_batch: batch_entries, then one Message per
 * entry with the request's shared fields): the same sizes (fixed + body + properties bytes), CRCs,
 * properties dicts, [body, text] parts and flags, without the entries or the messages. None where
 * the general path must look: a body not well formed, fewer than min_count entries, a body longer
 * than max_body, properties longer than 32767 bytes. */
PyObject *batch_run(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t at, max_body, fixed, min_count;
    PyObject *outer, *crc;
    if (!PyArg_ParseTuple(args, "y*nUnnOn", &buf, &at, &outer, &max_body, &fixed, &crc, &min_count))
        return NULL;
    const unsigned char *b = (const unsigned char *)buf.buf;
    Py_ssize_t end = buf.len, p = at < 0 ? end : at;
    PyObject *props = PyList_New(0), *parts = PyList_New(0), *joined = NULL, *result = NULL;
    PyObject *sizes = NULL, *crcs = NULL, *flags = NULL;
    Py_ssize_t cap = 64, n = 0;
    int64_t *size_at = PyMem_Malloc(cap * sizeof *size_at);
    int32_t *crc_at = PyMem_Malloc(cap * sizeof *crc_at), *flag_at = PyMem_Malloc(cap * sizeof *flag_at);
    long long total = 0;
    if (!props || !parts || !size_at || !crc_at || !flag_at || glue_of(outer, &joined) < 0)
        goto done;
    while (p < end) {
        struct entry e;
        int got = next_entry(b, &p, end, outer, joined, &e);
        if (got < 0)
            goto done;
        if (got == 0)
            goto not_a_run;
        Py_ssize_t text_len;
        int fits = e.body_len <= max_body && PyUnicode_AsUTF8AndSize(e.text, &text_len) != NULL;
        PyObject *body = fits && text_len <= MAX_PROPS ?
            PyBytes_FromStringAndSize((const char *)e.body, e.body_len) : NULL;
        PyObject *c = body ? PyObject_CallOneArg(crc, body) : NULL;
        int bad = !c || PyList_Append(props, e.props) < 0 || PyList_Append(parts, body) < 0 ||
            PyList_Append(parts, e.text) < 0;
        Py_DECREF(e.props);
        Py_DECREF(e.text);
        Py_XDECREF(body);
        if (bad) {
            Py_XDECREF(c);
            if (PyErr_Occurred())
                goto done;
            goto not_a_run;             /* too long: the general path refuses it, in its words */
        }
        unsigned long v = PyLong_AsUnsignedLongMask(c);
        Py_DECREF(c);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto done;
        if (n == cap) {
            cap *= 2;
            if (GROW(size_at, cap) < 0 || GROW(crc_at, cap) < 0 || GROW(flag_at, cap) < 0)
                goto done;
        }
        crc_at[n] = (int32_t)(v & 0x7FFFFFFF);
        flag_at[n] = e.flag;
        size_at[n] = fixed + e.body_len + text_len;
        total += size_at[n];
        n++;
    }
    if (n < min_count || n == 0)
        goto not_a_run;
    sizes = PyBytes_FromStringAndSize((const char *)size_at, n * sizeof *size_at);
    crcs = sizes ? PyBytes_FromStringAndSize((const char *)crc_at, n * sizeof *crc_at) : NULL;
    flags = crcs ? PyBytes_FromStringAndSize((const char *)flag_at, n * sizeof *flag_at) : NULL;
    if (flags)
        result = Py_BuildValue("LOOOOO", total, sizes, crcs, props, parts, flags);
    goto done;
not_a_run:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(size_at);
    PyMem_Free(crc_at);
    PyMem_Free(flag_at);
    Py_XDECREF(joined);
    Py_XDECREF(props);
    Py_XDECREF(parts);
    Py_XDECREF(sizes);
    Py_XDECREF(crcs);
    Py_XDECREF(flags);
    PyBuffer_Release(&buf);
    return result;
}
