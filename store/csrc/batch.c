/* A producer's batch body (SEND_BATCH_MESSAGE, MessageDecoder.decodeMessages) read into the
 * entries a batch put stores, in one pass (the broker's send.py; its Python path is the reference). */
#include "kernel.h"

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
    Py_ssize_t p = 0, end = buf.len;
    int outer_set = PyUnicode_GET_LENGTH(outer) > 0;
    if (!out)
        goto fail;
    if (outer_set && !(joined = PyUnicode_FromFormat("\x02%U", outer)))
        goto fail;
    while (p < end) {
        if (p + 20 > end)
            goto none;
        int32_t total = get32(b + p), flag = get32(b + p + 12), blen = get32(b + p + 16);
        Py_ssize_t q = p + 20;
        if (blen < 0 || q + blen + 2 > end || total < 22 || p + total > end)
            goto none;
        int16_t plen = (int16_t)((uint16_t)b[q + blen] << 8 | b[q + blen + 1]);
        Py_ssize_t at = q + blen + 2;
        if (plen < 0 || at + plen > end)
            goto none;
        PyObject *inner = PyUnicode_DecodeUTF8((const char *)b + at, plen, "replace");
        if (!inner)
            goto fail;
        PyObject *text;
        Py_ssize_t n = PyUnicode_GET_LENGTH(inner);
        if (!outer_set) {
            text = inner;
        } else {
            int glue = n > 0 && PyUnicode_READ_CHAR(inner, n - 1) != 0x02;
            text = PyUnicode_Concat(inner, glue ? joined : outer);
            Py_DECREF(inner);
            if (!text)
                goto fail;
        }
        PyObject *props = parse_properties(NULL, text);
        PyObject *data = props ? PyBytes_FromStringAndSize((const char *)b + q, blen) : NULL;
        PyObject *entry = data ? Py_BuildValue("(iOOO)", flag, data, text, props) : NULL;
        Py_XDECREF(data);
        Py_DECREF(text);
        Py_XDECREF(props);
        if (!entry)
            goto fail;
        int bad = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (bad)
            goto fail;
        p += total;
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
