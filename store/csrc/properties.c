/* A properties string parsed (store/properties.py). */
#include "kernel.h"

/* parse_properties(text) -> dict: MessageDecoder.string2messageProperties. Pieces split on 0x02;
 * a piece is kept when both sides of its first 0x01 are non-empty; the last duplicate wins. */
PyObject *parse_properties(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "parse_properties: text must be str");
        return NULL;
    }
    PyObject *props = PyDict_New();
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const char *bytes = kind == PyUnicode_1BYTE_KIND ? (const char *)data : NULL;
    while (props && start < n) {
        Py_ssize_t end = start, eq = -1;
        if (bytes) {            /* the common text (Latin-1): the separators found by memchr */
            const char *sep = memchr(bytes + start, 0x02, n - start);
            end = sep ? sep - bytes : n;
            const char *mark = memchr(bytes + start, 0x01, end - start);
            eq = mark ? mark - bytes : -1;
        } else {
            for (; end < n; end++) {
                Py_UCS4 c = PyUnicode_READ(kind, data, end);
                if (c == 0x02)
                    break;
                if (c == 0x01 && eq < 0)
                    eq = end;
            }
        }
        if (eq > start && eq + 1 < end) {
            PyObject *key = PyUnicode_Substring(text, start, eq);
            PyObject *value = key ? PyUnicode_Substring(text, eq + 1, end) : NULL;
            if (!value || PyDict_SetItem(props, key, value) < 0)
                Py_CLEAR(props);
            Py_XDECREF(key);
            Py_XDECREF(value);
        }
        start = end + 1;
    }
    return props;
}

/* broker_properties(text, cluster) -> (props, text): what the broker stores for a send's properties
 * (store/properties.py, the Python reference): parsed as parse_properties does, WAIT dropped when it
 * says "true", CLUSTER set to `cluster` (in its place when present, else last), and written back in
 * the dict's order as format_properties writes it. */
PyObject *broker_properties(PyObject *self, PyObject *args)
{
    PyObject *text, *cluster;
    if (!PyArg_ParseTuple(args, "UU", &text, &cluster))
        return NULL;
    PyObject *props = parse_properties(NULL, text), *pieces = NULL, *out = NULL, *sep = NULL, *mark = NULL;
    if (!props)
        return NULL;
    PyObject *wait = PyDict_GetItemWithError(props, s_wait);
    if (!wait && PyErr_Occurred())
        goto done;
    if (wait && PyUnicode_Check(wait) && PyUnicode_CompareWithASCIIString(wait, "true") == 0 &&
            PyDict_DelItem(props, s_wait) < 0)
        goto done;
    if (PyDict_SetItem(props, s_cluster, cluster) < 0)
        goto done;
    Py_ssize_t n = PyDict_GET_SIZE(props), i = 0, at = 0;
    PyObject *k, *v;
    if (!(pieces = PyList_New(n)) || !(sep = PyUnicode_FromOrdinal(0x02)) || !(mark = PyUnicode_FromOrdinal(0x01)))
        goto done;
    while (PyDict_Next(props, &i, &k, &v)) {
        PyObject *piece = PyUnicode_Concat(k, mark);
        if (piece)
            PyUnicode_Append(&piece, v);
        if (!piece)
            goto done;
        PyList_SET_ITEM(pieces, at++, piece);
    }
    PyObject *joined = PyUnicode_Join(sep, pieces);
    if (joined) {
        out = PyTuple_Pack(2, props, joined);
        Py_DECREF(joined);
    }
done:
    Py_DECREF(props);
    Py_XDECREF(pieces);
    Py_XDECREF(sep);
    Py_XDECREF(mark);
    return out;
}
