/* A producer's batch read as spans of its own frame (store/recordrun.py FrameRun): the run's records
 * are written, dispatched and indexed from the frame's bytes, with no Python object per message.
 * Only for ASCII properties (the batch's own and every entry's), where the bytes stored are the
 * bytes sent and a value's Java hashCode is its bytes' hash; anything else goes to batch_run. */
#include "kernel.h"

/* Per record, native int64: */
enum {SP_BODY_AT, SP_BODY_LEN, SP_INNER_AT, SP_INNER_LEN, SP_TAIL, SP_TAGS_CODE, SP_UNIQ_AT, SP_UNIQ_LEN,
      SP_KEYS_AT, SP_KEYS_LEN, SP_N};
/* SP_TAIL: what follows the entry's own properties: nothing, the batch's, or 0x02 and the batch's.
 * SP_UNIQ_AT / SP_KEYS_AT: the value's offset in the frame (>= 0), in the batch's properties
 * (-2 - offset there), or NONE. */
enum {TAIL_NONE, TAIL_OUTER, TAIL_GLUED};
#define NONE (-1)
enum {K_TAGS, K_KEYS, K_UNIQ, K_WAIT, N_KEYS};
static const char *const key_names[N_KEYS] = {"TAGS", "KEYS", "UNIQ_KEY", "WAIT"};

struct found {
    Py_ssize_t at[N_KEYS], len[N_KEYS];
};

/* The values parse_properties keeps for the four names in text t[0..n) (pieces split on 0x02, a
 * piece kept when both sides of its first 0x01 are non-empty, the last one winning), as offsets
 * from t. Names not there stay as they were. */
static void scan(const unsigned char *t, Py_ssize_t n, struct found *f)
{
    Py_ssize_t start = 0;
    while (start < n) {
        const unsigned char *sep = memchr(t + start, 0x02, n - start);
        Py_ssize_t end = sep ? sep - t : n;
        const unsigned char *mark = memchr(t + start, 0x01, end - start);
        Py_ssize_t eq = mark ? mark - t : -1;
        if (eq > start && eq + 1 < end) {
            for (int k = 0; k < N_KEYS; k++) {
                size_t len = strlen(key_names[k]);
                if ((size_t)(eq - start) == len && memcmp(t + start, key_names[k], len) == 0) {
                    f->at[k] = eq + 1;
                    f->len[k] = end - eq - 1;
                }
            }
        }
        start = end + 1;
    }
}

static void none_found(struct found *f)
{
    for (int k = 0; k < N_KEYS; k++)
        f->at[k] = NONE, f->len[k] = 0;
}

static int ascii(const unsigned char *p, Py_ssize_t n)
{
    unsigned char acc = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        acc |= p[i];
    return acc < 0x80;
}

static uint32_t bytes_hash(const unsigned char *p, Py_ssize_t n)
{
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        h = 31 * h + p[i];
    return h;
}

/* batch_spans(frame, at, outer, max_body, fixed, crc, min_count)
 *     -> (total, sizes, crcs, flags, spans, may_wait) | None
 * What batch_run reads from the same body, as spans of the frame: sizes (native int64), CRCs
 * (native int32, 31 bits), flags (native int32), and per record SP_N native int64 (above) with its
 * tags code (Java hashCode of TAGS, 0 without) and where its UNIQ_KEY and KEYS are; may_wait: the
 * first record's WAIT is not "false". `outer`: the batch's own properties (bytes), merged after
 * each entry's as batch_run merges them. None where batch_run would answer None, or where a
 * properties byte is not ASCII (batch_run then reads it). */
PyObject *batch_spans(PyObject *self, PyObject *args)
{
    Py_buffer buf, outer;
    Py_ssize_t at, max_body, fixed, min_count;
    PyObject *crc;
    if (!PyArg_ParseTuple(args, "y*ny*nnOn", &buf, &at, &outer, &max_body, &fixed, &crc, &min_count))
        return NULL;
    const unsigned char *b = buf.buf, *o = outer.buf;
    Py_ssize_t end = buf.len, p = at < 0 ? end : at, n = 0, cap = 64;
    PyObject *result = NULL, *sizes = NULL, *crcs = NULL, *flags = NULL, *spans = NULL;
    int64_t *size_at = PyMem_Malloc(cap * sizeof *size_at), *span_at = PyMem_Malloc(cap * SP_N * sizeof *span_at);
    int32_t *crc_at = PyMem_Malloc(cap * sizeof *crc_at), *flag_at = PyMem_Malloc(cap * sizeof *flag_at);
    long long total = 0;
    int may_wait = 1;
    struct found of;
    none_found(&of);
    if (!size_at || !span_at || !crc_at || !flag_at) {
        PyErr_NoMemory();
        goto done;
    }
    if (!ascii(o, outer.len))
        goto not_here;
    scan(o, outer.len, &of);
    while (p < end) {
        /* next_entry's shape checks (batch.c), on the same bytes */
        if (p + 20 > end)
            goto not_here;
        int32_t entry = get32(b + p), blen = get32(b + p + 16);
        Py_ssize_t q = p + 20;
        if (blen < 0 || q + blen + 2 > end || entry < 22 || p + entry > end)
            goto not_here;
        int16_t plen = (int16_t)((uint16_t)b[q + blen] << 8 | b[q + blen + 1]);
        Py_ssize_t inner = q + blen + 2;
        if (plen < 0 || inner + plen > end || !ascii(b + inner, plen))
            goto not_here;
        int tail = outer.len == 0 ? TAIL_NONE : (plen > 0 && b[inner + plen - 1] != 0x02 ? TAIL_GLUED : TAIL_OUTER);
        Py_ssize_t text_len = plen + (tail == TAIL_NONE ? 0 : outer.len + (tail == TAIL_GLUED));
        if (blen > max_body || text_len > MAX_PROPS)
            goto not_here;           /* the general path refuses it, in its words */
        if (n == cap) {
            cap *= 2;
            if (GROW(size_at, cap) < 0 || GROW(span_at, cap * SP_N) < 0 || GROW(crc_at, cap) < 0 ||
                    GROW(flag_at, cap) < 0)
                goto done;
        }
        PyObject *view = PyMemoryView_FromMemory((char *)b + q, blen, PyBUF_READ);
        PyObject *c = view ? PyObject_CallOneArg(crc, view) : NULL;
        Py_XDECREF(view);
        if (!c)
            goto done;
        unsigned long v = PyLong_AsUnsignedLongMask(c);
        Py_DECREF(c);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto done;
        struct found f;
        none_found(&f);
        scan(b + inner, plen, &f);
        for (int k = 0; k < N_KEYS; k++) {
            if (f.at[k] != NONE)
                f.at[k] += inner;
            if (of.at[k] != NONE)            /* the batch's own come after: they win */
                f.at[k] = -2 - of.at[k], f.len[k] = of.len[k];
        }
        int64_t *s = span_at + n * SP_N;
        s[SP_BODY_AT] = q;
        s[SP_BODY_LEN] = blen;
        s[SP_INNER_AT] = inner;
        s[SP_INNER_LEN] = plen;
        s[SP_TAIL] = tail;
        s[SP_TAGS_CODE] = 0;
        if (f.at[K_TAGS] != NONE)
            s[SP_TAGS_CODE] = (int32_t)bytes_hash(f.at[K_TAGS] >= 0 ? b + f.at[K_TAGS] : o + (-2 - f.at[K_TAGS]),
                                                  f.len[K_TAGS]);
        s[SP_UNIQ_AT] = f.at[K_UNIQ];
        s[SP_UNIQ_LEN] = f.len[K_UNIQ];
        s[SP_KEYS_AT] = f.at[K_KEYS];
        s[SP_KEYS_LEN] = f.len[K_KEYS];
        if (n == 0 && f.at[K_WAIT] != NONE && f.len[K_WAIT] == 5)
            may_wait = memcmp(f.at[K_WAIT] >= 0 ? b + f.at[K_WAIT] : o + (-2 - f.at[K_WAIT]), "false", 5) != 0;
        crc_at[n] = (int32_t)(v & 0x7FFFFFFF);
        flag_at[n] = get32(b + p + 12);
        size_at[n] = fixed + blen + text_len;
        total += size_at[n];
        n++;
        p += entry;
    }
    if (n < min_count || n == 0)
        goto not_here;
    sizes = PyBytes_FromStringAndSize((const char *)size_at, n * sizeof *size_at);
    crcs = sizes ? PyBytes_FromStringAndSize((const char *)crc_at, n * sizeof *crc_at) : NULL;
    flags = crcs ? PyBytes_FromStringAndSize((const char *)flag_at, n * sizeof *flag_at) : NULL;
    spans = flags ? PyBytes_FromStringAndSize((const char *)span_at, n * SP_N * sizeof *span_at) : NULL;
    if (spans)
        result = Py_BuildValue("LOOOOO", total, sizes, crcs, flags, spans, may_wait ? Py_True : Py_False);
    goto done;
not_here:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(size_at);
    PyMem_Free(span_at);
    PyMem_Free(crc_at);
    PyMem_Free(flag_at);
    Py_XDECREF(sizes);
    Py_XDECREF(crcs);
    Py_XDECREF(flags);
    Py_XDECREF(spans);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&outer);
    return result;
}

/* The spans argument checked against the frame: n records, or -1 with ValueError. */
static Py_ssize_t checked_spans(const Py_buffer *frame, const Py_buffer *outer, const Py_buffer *spans)
{
    Py_ssize_t n = spans->len / (SP_N * 8);
    const int64_t *s = spans->buf;
    if (spans->len != n * SP_N * 8)
        goto bad;
    for (Py_ssize_t i = 0; i < n; i++, s += SP_N) {
        if (s[SP_BODY_AT] < 0 || s[SP_BODY_LEN] < 0 || s[SP_BODY_AT] + s[SP_BODY_LEN] > frame->len ||
                s[SP_INNER_AT] < 0 || s[SP_INNER_LEN] < 0 || s[SP_INNER_AT] + s[SP_INNER_LEN] > frame->len ||
                s[SP_TAIL] < TAIL_NONE || s[SP_TAIL] > TAIL_GLUED)
            goto bad;
        for (int k = SP_UNIQ_AT; k <= SP_KEYS_AT; k += 2) {
            int64_t at = s[k], len = s[k + 1];
            if (at == NONE)
                continue;
            if (len < 0 || (at >= 0 ? at + len > frame->len : -2 - at < 0 || -2 - at + len > outer->len))
                goto bad;
        }
    }
    return n;
bad:
    PyErr_SetString(PyExc_ValueError, "the spans do not fit the frame");
    return -1;
}

/* frame_write(frame, spans, outer, flags, buf, pos, row, topic_part, sizes, crcs, phys, queue_offset, store_ts)
 * run_write (run.c) of a batch_spans run: per record the row with its own fields filled in, the
 * body, topic_part, PROPERTIESLENGTH and the properties (the entry's, then the batch's). */
PyObject *frame_write(PyObject *self, PyObject *args)
{
    PyObject *buf_obj;
    Py_ssize_t pos;
    Py_buffer frame, spans, outer, flags, row, topic, sizes, crcs, buf = {0};
    long long phys, queue_offset, store_ts;
    if (!PyArg_ParseTuple(args, "y*y*y*y*Ony#y#y*y*LLL", &frame, &spans, &outer, &flags, &buf_obj, &pos, &row.buf,
                          &row.len, &topic.buf, &topic.len, &sizes, &crcs, &phys, &queue_offset, &store_ts))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = checked_spans(&frame, &outer, &spans);
    if (n < 0)
        goto release;
    if (row.len != FIXED_SIZE || sizes.len != n * 8 || crcs.len != n * 4 || flags.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "frame_write: row, sizes, crcs or flags do not match the records");
        goto release;
    }
    const int64_t *size_at = sizes.buf, *s = spans.buf;
    const int32_t *crc_at = crcs.buf, *flag_at = flags.buf;
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *r = s + i * SP_N;
        Py_ssize_t text_len = r[SP_INNER_LEN] + (r[SP_TAIL] == TAIL_NONE ? 0 : outer.len + (r[SP_TAIL] == TAIL_GLUED));
        if (size_at[i] != FIXED_SIZE + topic.len + 2 + r[SP_BODY_LEN] + text_len || text_len > MAX_PROPS) {
            PyErr_SetString(PyExc_ValueError, "frame_write: a record's parts do not match its size");
            goto release;
        }
        total += size_at[i];
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        goto release;
    if (pos < 0 || pos + total > buf.len) {
        PyErr_SetString(PyExc_ValueError, "frame_write: the run does not fit the buffer");
        goto release;
    }
    const unsigned char *b = frame.buf;
    unsigned char *out = (unsigned char *)buf.buf + pos;
    long long at = phys;
    for (Py_ssize_t i = 0; i < n; i++, s += SP_N) {
        put_head(out, row.buf, size_at[i], crc_at[i], flag_at[i], queue_offset + i, at, store_ts, s[SP_BODY_LEN]);
        unsigned char *q = out + FIXED_SIZE;
        memcpy(q, b + s[SP_BODY_AT], s[SP_BODY_LEN]);
        q += s[SP_BODY_LEN];
        memcpy(q, topic.buf, topic.len);
        q += topic.len;
        Py_ssize_t text_len = s[SP_INNER_LEN] + (s[SP_TAIL] == TAIL_NONE ? 0 : outer.len + (s[SP_TAIL] == TAIL_GLUED));
        q[0] = (unsigned char)(text_len >> 8);
        q[1] = (unsigned char)text_len;
        q += 2;
        memcpy(q, b + s[SP_INNER_AT], s[SP_INNER_LEN]);
        q += s[SP_INNER_LEN];
        if (s[SP_TAIL] == TAIL_GLUED)
            *q++ = 0x02;
        if (s[SP_TAIL] != TAIL_NONE)
            memcpy(q, outer.buf, outer.len);
        out += size_at[i];
        at += size_at[i];
    }
    result = Py_NewRef(Py_None);
release:
    if (buf.obj)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&frame);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&outer);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&crcs);
    return result;
}

/* prefix + the ASCII bytes p[0..n) as a str. */
static PyObject *prefixed(const char *prefix, Py_ssize_t prefix_len, const unsigned char *p, Py_ssize_t n)
{
    PyObject *s = PyUnicode_New(prefix_len + n, 127);
    if (s) {
        memcpy(PyUnicode_DATA(s), prefix, prefix_len);
        memcpy((char *)PyUnicode_DATA(s) + prefix_len, p, n);
    }
    return s;
}

/* frame_units(frame, spans, outer, prefix, phys, sizes, index_on) -> (units, keys, key_phys)
 * run_units (dispatch.c) of a batch_spans run: its consume queue units and, when index_on, its
 * index keys in order (per record its UNIQ_KEY, then each non-empty word of KEYS split on spaces,
 * each as prefix + key) with their records' offsets. `prefix` must be ASCII ("topic#"). */
PyObject *frame_units(PyObject *self, PyObject *args)
{
    Py_buffer frame, spans, outer, sizes;
    const char *prefix;
    Py_ssize_t prefix_len;
    long long phys;
    int index_on;
    if (!PyArg_ParseTuple(args, "y*y*y*s#Ly*p", &frame, &spans, &outer, &prefix, &prefix_len, &phys, &sizes,
                          &index_on))
        return NULL;
    PyObject *units = NULL, *keys = NULL, *key_phys = NULL, *result = NULL;
    Py_ssize_t n = checked_spans(&frame, &outer, &spans);
    if (n < 0)
        goto done;
    if (sizes.len != n * 8 || !ascii((const unsigned char *)prefix, prefix_len)) {
        PyErr_SetString(PyExc_ValueError, "frame_units: sizes do not match the records, or the prefix is not ASCII");
        goto done;
    }
    const int64_t *size_at = sizes.buf, *s = spans.buf;
    const unsigned char *b = frame.buf, *o = outer.buf;
    units = PyBytes_FromStringAndSize(NULL, n * 20);
    keys = PyList_New(0);
    key_phys = PyList_New(0);
    if (!units || !keys || !key_phys)
        goto done;
    unsigned char *u = (unsigned char *)PyBytes_AS_STRING(units);
    for (Py_ssize_t i = 0; i < n; i++, u += 20, s += SP_N) {
        put_unit(u, phys, size_at[i], s[SP_TAGS_CODE]);
        for (int k = SP_UNIQ_AT; index_on && k <= SP_KEYS_AT; k += 2) {
            if (s[k] == NONE)
                continue;
            const unsigned char *v = s[k] >= 0 ? b + s[k] : o + (-2 - s[k]);
            Py_ssize_t len = s[k + 1], w = 0;
            while (w < len) {          /* UNIQ_KEY whole; KEYS word by word */
                Py_ssize_t e = k == SP_UNIQ_AT ? len : w;
                while (e < len && v[e] != ' ')
                    e++;
                if (e > w) {
                    PyObject *key = prefixed(prefix, prefix_len, v + w, e - w);
                    PyObject *at = key ? PyLong_FromLongLong(phys) : NULL;
                    int bad = !at || PyList_Append(keys, key) < 0 || PyList_Append(key_phys, at) < 0;
                    Py_XDECREF(key);
                    Py_XDECREF(at);
                    if (bad)
                        goto done;
                }
                w = e + 1;
            }
        }
        phys += size_at[i];
    }
    result = PyTuple_Pack(3, units, keys, key_phys);
done:
    Py_XDECREF(units);
    Py_XDECREF(keys);
    Py_XDECREF(key_phys);
    PyBuffer_Release(&frame);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&outer);
    PyBuffer_Release(&sizes);
    return result;
}
