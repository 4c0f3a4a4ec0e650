/* Index entries written into a mapped index file (store/indexwriter.py). */
#include "kernel.h"

/* index_put(buf, slots, max_entries, index_count, begin_ts, keys, phys, stamps) -> new hash slots
 * IndexFile.putKey for each key (a str: "topic#key") in order, the entries appended after
 * index_count; phys and stamps are native int64 arrays, one per key. The caller has checked that
 * they fit (index_count + len(keys) <= max_entries) and updates the header. */
PyObject *index_put(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *keys;
    Py_ssize_t slots, max_entries, count;
    long long begin_ts;
    Py_buffer phys, stamps, buf = {0};
    if (!PyArg_ParseTuple(args, "OnnnLO!y*y*", &buf_obj, &slots, &max_entries, &count, &begin_ts,
                          &PyList_Type, &keys, &phys, &stamps))
        return NULL;
    PyObject *result = NULL;
    int32_t on_stack[256], *hashes = on_stack;     /* the keys' hashes (below) */
    Py_ssize_t k = PyList_GET_SIZE(keys);
    if (slots <= 0 || count < 1 || count + k > max_entries || phys.len != k * 8 || stamps.len != k * 8) {
        PyErr_SetString(PyExc_ValueError, "index_put: the keys do not fit the file or their offsets");
        goto release;
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        goto release;
    if (buf.len < INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + max_entries * INDEX_ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "index_put: the buffer is smaller than the index file");
        goto release;
    }
    unsigned char *slot_table = (unsigned char *)buf.buf + INDEX_HEADER_SIZE;
    unsigned char *entries = slot_table + slots * INDEX_SLOT_SIZE;
    const int64_t *phy_at = phys.buf, *ts_at = stamps.buf;
    /* The keys' hashes first, each one's hash slot prefetched: the slots are spread over the whole
     * table, so the second pass finds them in cache instead of waiting on memory key after key. */
    if (k > 256 && !(hashes = PyMem_Malloc(k * sizeof *hashes))) {
        hashes = on_stack;
        PyErr_NoMemory();
        goto release;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "index_put: keys must be str");
            goto release;
        }
        int32_t h = (int32_t)java_hash(0, key);
        /* abs(); Integer.MIN_VALUE stays negative in Java and indexKeyHashMethod makes it 0 */
        hashes[i] = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
        __builtin_prefetch(slot_table + (hashes[i] % slots) * INDEX_SLOT_SIZE, 1);
    }
    long long new_slots = 0;
    for (Py_ssize_t i = 0; i < k; i++, count++) {
        int32_t key_hash = hashes[i];
        unsigned char *slot = slot_table + (key_hash % slots) * INDEX_SLOT_SIZE;
        int32_t slot_value = (int32_t)((uint32_t)slot[0] << 24 | (uint32_t)slot[1] << 16 | (uint32_t)slot[2] << 8 | slot[3]);
        if (slot_value <= 0 || slot_value > count)
            slot_value = 0;
        long long diff = 0;
        if (begin_ts > 0) {
            diff = (ts_at[i] - begin_ts) / 1000;
            diff = diff < 0 ? 0 : (diff > INT32_MAX ? INT32_MAX : diff);
        }
        unsigned char *e = entries + count * INDEX_ENTRY_SIZE;
        put32(e, (uint32_t)key_hash);
        put64(e + 4, (uint64_t)phy_at[i]);
        put32(e + 12, (uint32_t)diff);
        put32(e + 16, (uint32_t)slot_value);
        put32(slot, (uint32_t)count);
        new_slots += slot_value == 0;
    }
    result = PyLong_FromLongLong(new_slots);
release:
    if (hashes != on_stack)
        PyMem_Free(hashes);
    if (buf.obj)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&stamps);
    return result;
}
