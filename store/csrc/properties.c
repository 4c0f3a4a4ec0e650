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
