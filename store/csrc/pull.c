/* A pull's answer body (store/pullbody.py): the records of a run of consume queue units joined into
 * one bytes object, without a Python object per message. */
#include "kernel.h"

#define CQ_UNIT 20
#define BLANK_SIZE 0x7FFFFFFF

/* pull_body(cq, lo, hi, log, log_start, log_written, log_min, max_count, max_bytes, codes, queue_id,
 *           queue_offset) -> (body, count, scanned) | None
 * cq[lo:hi]: the units to scan (20 bytes each: offset int64, size int32, tags code int64), the one at
 * lo of queue offset queue_offset; log: the commit log file that starts at log_start, written up to
 * log_written bytes; codes: None (every unit) or native int32 tags codes, one of which a unit's code
 * (as a Java int) must equal.
 * MessageStore.get's loop, unit by unit: stop at max_count records or once max_bytes are reached.
 * None where that loop would meet anything else before it stops (a blank unit, a removed record,
 * a record outside this file or past its written end, a unit whose record does not say it is that
 * unit's: size, magic, queue id, queue offset, own offset), or takes nothing: the caller's general
 * path decides those. */
PyObject *pull_body(PyObject *self, PyObject *args)
{
    Py_buffer cq, log;
    Py_ssize_t lo, hi, max_count;
    long long log_start, log_written, log_min, max_bytes, queue_offset;
    int queue_id;
    PyObject *codes, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*nny*LLLnLOiL", &cq, &lo, &hi, &log, &log_start, &log_written, &log_min,
                          &max_count, &max_bytes, &codes, &queue_id, &queue_offset))
        return NULL;
    const int32_t *code_at = NULL;
    Py_ssize_t n_codes = 0;
    Py_buffer code_buf = {0};
    if (codes != Py_None) {
        if (PyObject_GetBuffer(codes, &code_buf, PyBUF_SIMPLE) < 0)
            goto release;
        code_at = (const int32_t *)code_buf.buf;
        n_codes = code_buf.len / 4;
    }
    if (lo < 0 || hi > cq.len || lo > hi || log_written > log.len) {
        PyErr_SetString(PyExc_ValueError, "pull_body: a range outside its buffer");
        goto release;
    }
    const unsigned char *units = (const unsigned char *)cq.buf;
    Py_ssize_t count = 0, scanned = 0;
    long long total = 0;
    for (Py_ssize_t p = lo; p + CQ_UNIT <= hi; p += CQ_UNIT) {     /* which units, and their total */
        if (count >= max_count || total >= max_bytes)
            break;
        scanned++;
        long long off = get64(units + p);
        int32_t size = get32(units + p + 8);
        if ((size == BLANK_SIZE && off == 0) || off < log_min)
            goto none;
        if (code_at) {
            int32_t code = (int32_t)(uint32_t)(uint64_t)get64(units + p + 12);
            Py_ssize_t k = 0;
            while (k < n_codes && code_at[k] != code)
                k++;
            if (k == n_codes)
                continue;
        }
        long long pos = off - log_start;
        if (pos < 0 || pos >= (long long)log.len || size <= 0 || pos + size > log_written)
            goto none;
        const unsigned char *rec = (const unsigned char *)log.buf + pos;
        uint32_t magic = (uint32_t)get32(rec + AT_MAGIC);
        if (size < RECORD_HEAD || get32(rec + AT_SIZE) != size || (magic != MESSAGE_MAGIC && magic != MESSAGE_MAGIC_V2)
                || get32(rec + AT_QUEUE_ID) != queue_id || get64(rec + AT_QUEUE_OFFSET) != queue_offset + scanned - 1
                || get64(rec + AT_PHYSICAL_OFFSET) != off)
            goto none;
        count++;
        total += size;
    }
    if (count == 0)
        goto none;
    PyObject *body = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!body)
        goto release;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(body);
    const unsigned char *records = (const unsigned char *)log.buf;
    Py_ssize_t taken = 0, p = lo;
    for (Py_ssize_t k = 0; k < scanned; k++, p += CQ_UNIT) {        /* the same units again: their bytes */
        if (code_at) {
            int32_t code = (int32_t)(uint32_t)(uint64_t)get64(units + p + 12);
            Py_ssize_t c = 0;
            while (c < n_codes && code_at[c] != code)
                c++;
            if (c == n_codes)
                continue;
        }
        int32_t size = get32(units + p + 8);
        memcpy(out, records + (get64(units + p) - log_start), (size_t)size);
        out += size;
        taken++;
    }
    result = Py_BuildValue("(Nnn)", body, taken, scanned);
    goto release;
none:
    Py_INCREF(Py_None);
    result = Py_None;
release:
    if (code_buf.obj)
        PyBuffer_Release(&code_buf);
    PyBuffer_Release(&cq);
    PyBuffer_Release(&log);
    return result;
}
