/* The fields of a SEND_MESSAGE_V2 request frame's JSON header, read in one C pass (the broker's
 * send hot path; mqtool/broker/fastsend.py). One module, mqtool_remoting._header.
 *
 *   send_v2_fields(body) -> (opaque, header length, topic, properties, queue id, sys flag, flag,
 *                            born timestamp, reconsume times) | None
 *   send_batch_fields(body) -> the same of a SEND_BATCH_MESSAGE frame (code 320, "m" any string)
 *   fill_frame(parts, slots, opaque, *values) -> an answer frame from a header template (fill.c)
 *
 * `body` is a frame without its length field: the header-length int, the header, the message body.
 * It answers only where it is sure to read what fastsend's Python reader (orjson and its checks)
 * reads: a JSON header of plain objects, strings and integers, "code" 310, "flag" 0, an int
 * "opaque", an "extFields" object of strings holding a, b and c, and d, e, f, g, h (and j when
 * present) written as fastsend's plain_int takes them, "m" not "true". Anything else (another
 * shape, an escape it does not decode, bytes that are not UTF-8, a value out of range) gives None
 * and the Python reader decides, so this module never widens what the fast path takes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SEND_V2 310
#define SEND_BATCH 320
#define MAX_HEADER (1 << 24)

typedef struct {
    const unsigned char *p, *end;
} Cursor;

typedef struct {                 /* a string as it sits in the header: its bytes and whether it has escapes */
    const unsigned char *at;
    Py_ssize_t len;
    int escaped;
} Str;

/* Strict UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF), as orjson reads a
 * document: JSON's own characters are ASCII, so the whole header is checked at once. */
static int valid_utf8(const unsigned char *p, Py_ssize_t n)
{
    const unsigned char *end = p + n;
    while (p < end) {
        unsigned char b = *p;
        if (b < 0x80) {
            p++;
            continue;
        }
        int more;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) { more = 1; cp = b & 0x1F; }
        else if (b >= 0xE0 && b <= 0xEF) { more = 2; cp = b & 0x0F; }
        else if (b >= 0xF0 && b <= 0xF4) { more = 3; cp = b & 0x07; }
        else return 0;
        if (end - p <= more)
            return 0;
        for (int i = 1; i <= more; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if ((more == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (more == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        p += more + 1;
    }
    return 1;
}

static void skip_ws(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int hex4(const unsigned char *h, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned d = h[i];
        if (d >= '0' && d <= '9') d -= '0';
        else if (d >= 'a' && d <= 'f') d -= 'a' - 10;
        else if (d >= 'A' && d <= 'F') d -= 'A' - 10;
        else return 0;
        v = v << 4 | d;
    }
    *out = v;
    return 1;
}

/* A JSON string at c->p (its opening quote): 1, or 0 when it is not one this reader takes. */
static int read_str(Cursor *c, Str *s)
{
    if (c->p >= c->end || *c->p != '"')
        return 0;
    const unsigned char *q = ++c->p;
    int escaped = 0;
    while (q < c->end && *q != '"') {
        if (*q < 0x20)
            return 0;                            /* a raw control character: not JSON */
        if (*q == '\\') {                         /* an escape JSON allows; no surrogate (\uD800-\uDFFF) */
            escaped = 1;
            if (++q >= c->end || !strchr("\"\\/bfnrtu", *q) || *q == 0)
                return 0;
            if (*q == 'u') {
                unsigned u;
                if (c->end - q < 5 || !hex4(q + 1, &u) || (u >= 0xD800 && u <= 0xDFFF))
                    return 0;
                q += 4;
            }
        }
        q++;
    }
    if (q >= c->end)
        return 0;
    s->at = c->p;
    s->len = q - c->p;
    s->escaped = escaped;
    c->p = q + 1;
    return 1;
}

/* The Python str of a header string, or NULL with no error set when this reader does not decode
 * it (a surrogate escape, an unknown escape, bytes that are not UTF-8). */
static PyObject *str_value(const Str *s)
{
    if (!s->escaped) {
        PyObject *o = PyUnicode_DecodeUTF8((const char *)s->at, s->len, "strict");
        if (!o && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            PyErr_Clear();
        return o;
    }
    unsigned char small[512], *buf = s->len <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc(s->len);
    if (!buf)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    PyObject *o = NULL;
    for (const unsigned char *q = s->at, *end = s->at + s->len; q < end; q++) {
        if (*q != '\\') {
            buf[n++] = *q;
            continue;
        }
        q++;
        unsigned u;
        switch (*q) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u':                                  /* \uXXXX: at most 3 UTF-8 bytes, fewer than its 6 */
            if (end - q < 5 || !hex4(q + 1, &u) || (u >= 0xD800 && u <= 0xDFFF))
                goto done;
            q += 4;
            if (u < 0x80) {
                buf[n++] = (unsigned char)u;
            } else if (u < 0x800) {
                buf[n++] = (unsigned char)(0xC0 | u >> 6);
                buf[n++] = (unsigned char)(0x80 | (u & 0x3F));
            } else {
                buf[n++] = (unsigned char)(0xE0 | u >> 12);
                buf[n++] = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
                buf[n++] = (unsigned char)(0x80 | (u & 0x3F));
            }
            break;
        default:
            goto done;
        }
    }
    o = PyUnicode_DecodeUTF8((const char *)buf, n, "strict");
    if (!o && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
done:
    if (buf != small)
        PyMem_Free(buf);
    return o;
}

/* A JSON integer (no fraction or exponent, no leading zero) that fits in 63 bits: 1, else 0. */
static int read_int(Cursor *c, long long *out)
{
    const unsigned char *q = c->p;
    int neg = q < c->end && *q == '-';
    q += neg;
    if (q >= c->end || *q < '0' || *q > '9' || (*q == '0' && q + 1 < c->end && q[1] >= '0' && q[1] <= '9'))
        return 0;
    unsigned long long v = 0;
    int digits = 0;
    while (q < c->end && *q >= '0' && *q <= '9') {
        if (++digits > 18)
            return 0;
        v = v * 10 + (*q++ - '0');
    }
    if (q < c->end && (*q == '.' || *q == 'e' || *q == 'E'))
        return 0;
    *out = neg ? -(long long)v : (long long)v;
    c->p = q;
    return 1;
}

/* fastsend.plain_int: optional '-', then 1 to digits-1 ASCII digits. */
static int plain_int(const Str *s, int digits, long long *out)
{
    if (s->escaped || s->len == 0)
        return 0;
    const unsigned char *q = s->at, *end = s->at + s->len;
    int neg = *q == '-';
    q += neg;
    Py_ssize_t n = end - q;
    if (n <= 0 || n >= digits)
        return 0;
    long long v = 0;
    for (; q < end; q++) {
        if (*q < '0' || *q > '9')
            return 0;
        v = v * 10 + (*q - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

static int is_key(const Str *k, const char *name)
{
    size_t n = strlen(name);
    return !k->escaped && (size_t)k->len == n && memcmp(k->at, name, n) == 0;
}

enum {F_A, F_B, F_C, F_D, F_E, F_F, F_G, F_H, F_I, F_J, F_M, N_FIELDS};

/* The extFields object at c->p: every value a string; the one-letter fields kept. */
static int read_ext(Cursor *c, Str *fields, int *seen)
{
    if (c->p >= c->end || *c->p != '{')
        return 0;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 1;
    }
    for (;;) {
        Str k, v;
        skip_ws(c);
        if (!read_str(c, &k))
            return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p++ != ':')
            return 0;
        skip_ws(c);
        if (!read_str(c, &v))
            return 0;
        if (k.len == 1 && !k.escaped) {
            static const char letters[N_FIELDS] = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'm'};
            for (int i = 0; i < N_FIELDS; i++)
                if (k.at[0] == (unsigned char)letters[i]) {
                    fields[i] = v;           /* a repeated key: the last one, as orjson keeps */
                    seen[i] = 1;
                }
        } else if (k.escaped) {
            return 0;                        /* an escaped key might spell a field's name */
        }
        skip_ws(c);
        if (c->p >= c->end)
            return 0;
        if (*c->p == '}') {
            c->p++;
            return 1;
        }
        if (*c->p++ != ',')
            return 0;
    }
}

/* The fields of a frame of request code `want`: SEND_MESSAGE_V2 (310), whose "m" must not say
 * "true" (a batch), or SEND_BATCH_MESSAGE (320), always a batch whatever "m" says. */
static PyObject *send_fields(PyObject *arg, long long want)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    const unsigned char *b = view.buf;
    if (view.len < 4)
        goto none;
    uint32_t mark = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    Py_ssize_t hlen = mark & 0xFFFFFF;
    if (mark >> 24 || 4 + hlen > view.len)
        goto none;
    if (!valid_utf8(b + 4, hlen))
        goto none;                               /* orjson refuses the whole header */
    Cursor c = {b + 4, b + 4 + hlen};
    Str fields[N_FIELDS] = {{0}};
    int seen[N_FIELDS] = {0}, have_code = 0, have_opaque = 0, have_ext = 0;
    long long code = 0, flag = 0, opaque = 0;
    skip_ws(&c);
    if (c.p >= c.end || *c.p++ != '{')
        goto none;
    for (;;) {
        Str k, sv;
        long long iv;
        skip_ws(&c);
        if (!read_str(&c, &k) || k.escaped)
            goto none;
        skip_ws(&c);
        if (c.p >= c.end || *c.p++ != ':')
            goto none;
        skip_ws(&c);
        if (is_key(&k, "extFields")) {
            memset(seen, 0, sizeof seen);        /* a repeated extFields: the last one */
            if (!read_ext(&c, fields, seen))
                goto none;
            have_ext = 1;
        } else if (c.p < c.end && *c.p == '"') {
            if (!read_str(&c, &sv))
                goto none;
            if (is_key(&k, "code") || is_key(&k, "flag") || is_key(&k, "opaque") || is_key(&k, "version"))
                goto none;                       /* a string where an int must be */
        } else if (read_int(&c, &iv)) {
            if (is_key(&k, "code")) {
                code = iv;
                have_code = 1;
            } else if (is_key(&k, "flag")) {
                flag = iv;
            } else if (is_key(&k, "opaque")) {
                opaque = iv;
                have_opaque = 1;
            } else if (is_key(&k, "language") || is_key(&k, "remark")) {
                goto none;                       /* an int where a string must be */
            }
        } else {
            goto none;                           /* null, true, a float, an array, an object */
        }
        skip_ws(&c);
        if (c.p >= c.end)
            goto none;
        if (*c.p == '}') {
            c.p++;
            break;
        }
        if (*c.p++ != ',')
            goto none;
    }
    skip_ws(&c);
    if (c.p != c.end || !have_code || code != want || flag != 0 || !have_opaque || !have_ext)
        goto none;
    if (!seen[F_A] || !seen[F_B] || !seen[F_C])
        goto none;
    long long queue_nums, queue_id, sys_flag, born_ts, mflag, reconsume = 0;
    if (!seen[F_D] || !seen[F_E] || !seen[F_F] || !seen[F_G] || !seen[F_H] ||
            !plain_int(&fields[F_D], 10, &queue_nums) || !plain_int(&fields[F_E], 10, &queue_id) ||
            !plain_int(&fields[F_F], 10, &sys_flag) || !plain_int(&fields[F_G], 19, &born_ts) ||
            !plain_int(&fields[F_H], 10, &mflag) || (seen[F_J] && !plain_int(&fields[F_J], 10, &reconsume)))
        goto none;
    if (seen[F_M]) {                             /* "batch": the general path takes "true" in any case */
        const Str *m = &fields[F_M];
        if (m->escaped)
            goto none;
        if (want == SEND_BATCH)
            goto m_read;
        if (m->len == 4 && (m->at[0] | 0x20) == 't' && (m->at[1] | 0x20) == 'r' && (m->at[2] | 0x20) == 'u' &&
                (m->at[3] | 0x20) == 'e')
            goto none;
        for (Py_ssize_t i = 0; i < m->len; i++)
            if (m->at[i] >= 0x80)
                goto none;
    }
m_read:
    /* a and c only need to be strings; their text must still be what orjson would accept */
    PyObject *a = str_value(&fields[F_A]), *cc = a ? str_value(&fields[F_C]) : NULL;
    PyObject *topic = cc ? str_value(&fields[F_B]) : NULL;
    PyObject *props = NULL;
    if (topic)
        props = seen[F_I] ? str_value(&fields[F_I]) : PyUnicode_FromStringAndSize("", 0);
    Py_XDECREF(a);
    Py_XDECREF(cc);
    if (!props) {
        Py_XDECREF(topic);
        if (PyErr_Occurred())
            goto done;
        goto none;
    }
    result = Py_BuildValue("(LnNNLLLLL)", opaque, hlen, topic, props, queue_id, sys_flag, mflag, born_ts, reconsume);
    goto done;
none:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *send_v2_fields(PyObject *self, PyObject *arg)
{
    return send_fields(arg, SEND_V2);
}

static PyObject *send_batch_fields(PyObject *self, PyObject *arg)
{
    return send_fields(arg, SEND_BATCH);
}

PyObject *fill_frame(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

static PyMethodDef methods[] = {
    {"send_v2_fields", send_v2_fields, METH_O, "A SEND_MESSAGE_V2 frame's header fields, or None."},
    {"send_batch_fields", send_batch_fields, METH_O, "A SEND_BATCH_MESSAGE frame's header fields, or None."},
    {"fill_frame", (PyCFunction)(void (*)(void))fill_frame, METH_FASTCALL, "An answer frame from a header template, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_header", NULL, -1, methods};

PyMODINIT_FUNC PyInit__header(void)
{
    return PyModule_Create(&module);
}
