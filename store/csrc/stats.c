/* `store stats`: per (topic, queue) totals of a chunk of records (store/stats.py). */
#include "kernel.h"

/* The per-(topic, queue) totals of `store stats`: one hash table entry per distinct topic bytes
 * and queue id, the topic compared by its bytes in the buffer. */
struct total {
    uint64_t hash;
    int64_t topic_pos, messages, bytes, min_queue_offset, max_queue_offset, first_store_time, last_store_time;
    int32_t topic_len, queue_id, used;
};

static struct total *totals_grow(struct total *old, size_t *cap)
{
    size_t n = *cap * 2;
    struct total *t = calloc(n, sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < *cap; i++)
        if (old[i].used) {
            size_t j = old[i].hash & (n - 1);
            while (t[j].used)
                j = (j + 1) & (n - 1);
            t[j] = old[i];
        }
    free(old);
    *cap = n;
    return t;
}

/* queue_totals(buf, position, sys_flag, topic_pos, topic_len) -> [(topic bytes, queue id, messages,
 * bytes, min queue offset, max queue offset, first store time, last store time), ...]
 * Over the valid records of a header table (native int64 columns): QUEUEID, QUEUEOFFSET,
 * TOTALSIZE and STORETIMESTAMP read from each record's header in the buffer (STORETIMESTAMP
 * moves by 12 bytes after an IPv6 born host). The loop runs without the GIL. */
PyObject *queue_totals(PyObject *self, PyObject *args)
{
    Py_buffer buf = {0}, pos = {0}, flags = {0}, tpos = {0}, tlen = {0};
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*", &buf, &pos, &flags, &tpos, &tlen))
        return NULL;
    PyObject *result = NULL;
    struct total *t = NULL;
    size_t cap = 256, used = 0;
    Py_ssize_t n = pos.len / 8;
    if (flags.len != pos.len || tpos.len != pos.len || tlen.len != pos.len) {
        PyErr_SetString(PyExc_ValueError, "queue_totals: the columns differ in length");
        goto done;
    }
    const unsigned char *b = buf.buf;
    const int64_t *at = pos.buf, *flag_at = flags.buf, *tpos_at = tpos.buf, *tlen_at = tlen.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        int shift = (flag_at[i] & 0x10) ? 12 : 0;     /* BORNHOST_V6_FLAG */
        if (at[i] < 0 || at[i] + 64 + shift > buf.len || tpos_at[i] < 0 || tlen_at[i] < 0 ||
                tpos_at[i] + tlen_at[i] > buf.len) {
            PyErr_SetString(PyExc_ValueError, "queue_totals: a record outside the buffer");
            goto done;
        }
    }
    t = calloc(cap, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        goto done;
    }
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !failed; i++) {
        const unsigned char *r = b + at[i];
        const unsigned char *topic = b + tpos_at[i];
        int32_t len = (int32_t)tlen_at[i], qid = get32(r + 12);
        uint64_t h = 1469598103934665603ULL;           /* FNV-1a over the topic bytes, then the queue */
        for (int32_t k = 0; k < len; k++)
            h = (h ^ topic[k]) * 1099511628211ULL;
        h = (h ^ (uint32_t)qid) * 1099511628211ULL;
        size_t j = h & (cap - 1);
        while (t[j].used && !(t[j].hash == h && t[j].queue_id == qid && t[j].topic_len == len &&
                              memcmp(b + t[j].topic_pos, topic, len) == 0))
            j = (j + 1) & (cap - 1);
        int64_t qo = get64(r + 20), size = get32(r), ts = get64(r + 56 + ((flag_at[i] & 0x10) ? 12 : 0));
        struct total *e = &t[j];
        if (!e->used) {
            *e = (struct total){h, tpos_at[i], 1, size, qo, qo, ts, ts, len, qid, 1};
            if (++used * 2 > cap) {
                struct total *grown = totals_grow(t, &cap);
                if (grown)
                    t = grown;
                else
                    failed = 1;
            }
            continue;
        }
        e->messages++;
        e->bytes += size;
        if (qo < e->min_queue_offset) e->min_queue_offset = qo;
        if (qo > e->max_queue_offset) e->max_queue_offset = qo;
        if (ts < e->first_store_time) e->first_store_time = ts;
        if (ts > e->last_store_time) e->last_store_time = ts;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyList_New(0);
    for (size_t j = 0; result && j < cap; j++) {
        struct total *e = &t[j];
        if (!e->used)
            continue;
        PyObject *row = Py_BuildValue("y#iLLLLLL", (const char *)b + e->topic_pos, (Py_ssize_t)e->topic_len, e->queue_id,
                                      e->messages, e->bytes, e->min_queue_offset, e->max_queue_offset,
                                      e->first_store_time, e->last_store_time);
        if (!row || PyList_Append(result, row) < 0)
            Py_CLEAR(result);
        Py_XDECREF(row);
    }
done:
    free(t);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&pos);
    PyBuffer_Release(&flags);
    PyBuffer_Release(&tpos);
    PyBuffer_Release(&tlen);
    return result;
}
