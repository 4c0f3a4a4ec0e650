/* A HeaderTemplate filled into a whole answer frame (remoting/command.py's frame_plain): the
 * template's text parts with the opaque and the values between them, behind the frame's length
 * and header-length ints, in one pass. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define INT_TEXT 24               /* an int's decimal digits, its sign and the NUL */

/* A value's text: an int's decimal digits (written into `digits`) or an ASCII str's own
 * characters (no copy, any length: a batch's message id list is 64 ids); 0, or -1 when it is
 * neither, with no error set. */
static int value_text(PyObject *v, char *digits, const char **text, Py_ssize_t *len)
{
    if (PyLong_CheckExact(v)) {
        int overflow;
        long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (n == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return -1;
        }
        *len = snprintf(digits, INT_TEXT, "%lld", n);
        *text = digits;
        return 0;
    }
    if (PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)) {
        *len = PyUnicode_GET_LENGTH(v);
        *text = (const char *)PyUnicode_DATA(v);
        return 0;
    }
    return -1;
}

/* fill_frame(parts, slots, opaque, *values) -> bytes | None
 * parts: the template's text between its slots (bytes, one more than slots); slots: per slot the
 * value's index, or -1 for the opaque (written bare; a value is written in quotes). The values
 * are ints or ASCII strs that need no JSON escape (the caller vouches for that; a str with a quote
 * or a backslash gives None, as does anything else, and so do more than 8 slots). */
PyObject *fill_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || !PyTuple_CheckExact(args[0]) || !PyTuple_CheckExact(args[1]) ||
            PyTuple_GET_SIZE(args[0]) != PyTuple_GET_SIZE(args[1]) + 1) {
        PyErr_SetString(PyExc_TypeError, "fill_frame(parts, slots, opaque, *values)");
        return NULL;
    }
    PyObject *parts = args[0], *slots = args[1];
    Py_ssize_t n = PyTuple_GET_SIZE(slots), total = 0;
    char digits[8][INT_TEXT];
    const char *text[8];
    Py_ssize_t text_len[8];
    if (n > 8)
        Py_RETURN_NONE;          /* more slots than a real answer has: the caller's % format */
    for (Py_ssize_t k = 0; k <= n; k++) {
        PyObject *part = PyTuple_GET_ITEM(parts, k);
        if (!PyBytes_CheckExact(part)) {
            PyErr_SetString(PyExc_TypeError, "fill_frame: the parts are bytes");
            return NULL;
        }
        total += PyBytes_GET_SIZE(part);
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        long slot = PyLong_AsLong(PyTuple_GET_ITEM(slots, k));
        if (slot == -1 && PyErr_Occurred())
            return NULL;
        if (slot < -1 || 3 + slot >= nargs) {
            PyErr_SetString(PyExc_ValueError, "fill_frame: a slot names no value");
            return NULL;
        }
        PyObject *v = args[3 + slot];
        if (slot < 0 ? !PyLong_CheckExact(v) : 0)
            Py_RETURN_NONE;
        if (value_text(v, digits[k], &text[k], &text_len[k]) < 0 ||
                (slot >= 0 && (memchr(text[k], '"', text_len[k]) || memchr(text[k], '\\', text_len[k]))))
            Py_RETURN_NONE;
        total += text_len[k] + (slot < 0 ? 0 : 2);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, 8 + total);
    if (!out)
        return NULL;
    unsigned char *p = (unsigned char *)PyBytes_AS_STRING(out);
    unsigned long long frame = 4 + total, head = total;
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(frame >> (24 - 8 * i));
        p[4 + i] = (unsigned char)(head >> (24 - 8 * i));
    }
    p += 8;
    for (Py_ssize_t k = 0; k <= n; k++) {
        PyObject *part = PyTuple_GET_ITEM(parts, k);
        memcpy(p, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part));
        p += PyBytes_GET_SIZE(part);
        if (k == n)
            break;
        int quoted = PyLong_AsLong(PyTuple_GET_ITEM(slots, k)) >= 0;
        if (quoted)
            *p++ = '"';
        memcpy(p, text[k], text_len[k]);
        p += text_len[k];
        if (quoted)
            *p++ = '"';
    }
    return out;
}
