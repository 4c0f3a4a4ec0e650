/* The dispatch of put records: consume queue units and index keys (store/dispatch.py). */
#include "kernel.h"

/* A record's tags code from its properties dict: tagsString2tagsCode, the Java hashCode of TAGS
 * as a long, 0 without TAGS. 0, or -1 on error. */
static int tags_code(PyObject *d, int64_t *code)
{
    PyObject *tags = PyDict_GetItemWithError(d, s_tags);
    *code = 0;
    if (tags && PyUnicode_Check(tags) && PyUnicode_GET_LENGTH(tags) > 0)
        *code = (int32_t)java_hash(0, tags);
    return PyErr_Occurred() ? -1 : 0;
}

/* The index keys of one record onto keys / key_phys / key_ts: its UNIQ_KEY, then each non-empty
 * word of KEYS split on spaces, each as prefix + key ("topic#key"); key_ts may be NULL. 0, or -1 on error. */
static int record_keys(PyObject *d, PyObject *prefix, PyObject *phys, PyObject *ts, PyObject *keys,
                       PyObject *key_phys, PyObject *key_ts)
{
    PyObject *words[2] = {PyDict_GetItemWithError(d, s_uniq_key), NULL};
    if (!words[0] && PyErr_Occurred())
        return -1;
    words[1] = PyDict_GetItemWithError(d, s_keys);
    if (!words[1] && PyErr_Occurred())
        return -1;
    for (int w = 0; w < 2; w++) {
        if (!words[w] || !PyUnicode_Check(words[w]) || PyUnicode_GET_LENGTH(words[w]) == 0)
            continue;
        PyObject *parts = w == 0 ? Py_NewRef(words[0]) : PyUnicode_Split(words[1], s_space, -1);
        if (!parts)
            return -1;
        Py_ssize_t m = w == 0 ? 1 : PyList_GET_SIZE(parts);
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *word = w == 0 ? parts : PyList_GET_ITEM(parts, j);
            if (PyUnicode_GET_LENGTH(word) == 0)
                continue;
            PyObject *key = PyUnicode_Concat(prefix, word);
            int bad = !key || PyList_Append(keys, key) < 0 || PyList_Append(key_phys, phys) < 0 ||
                      (key_ts && PyList_Append(key_ts, ts) < 0);
            Py_XDECREF(key);
            if (bad) {
                Py_DECREF(parts);
                return -1;
            }
        }
        Py_DECREF(parts);
    }
    return 0;
}

/* run_units(props, prefix, phys, sizes, index_on) -> (units, keys, key_phys)
 * A placed run's consume queue units (20 bytes each, big-endian: commit log offset, size, tags
 * code) and, when index_on, its index keys in order with their records' offsets: per record its
 * UNIQ_KEY, then each non-empty word of KEYS split on spaces, each as prefix + key ("topic#key"). */
PyObject *run_units(PyObject *self, PyObject *args)
{
    PyObject *props, *prefix;
    long long phys;
    Py_buffer sizes;
    int index_on;
    if (!PyArg_ParseTuple(args, "O!ULy*p", &PyList_Type, &props, &prefix, &phys, &sizes, &index_on))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(props);
    PyObject *units = NULL, *keys = NULL, *key_phys = NULL, *result = NULL;
    if (sizes.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "run_units: sizes do not match the records");
        goto done;
    }
    const int64_t *size_at = sizes.buf;
    units = PyBytes_FromStringAndSize(NULL, n * 20);
    keys = PyList_New(0);
    key_phys = PyList_New(0);
    if (!units || !keys || !key_phys)
        goto done;
    unsigned char *u = (unsigned char *)PyBytes_AS_STRING(units);
    for (Py_ssize_t i = 0; i < n; i++, u += 20) {
        PyObject *d = PyList_GET_ITEM(props, i);
        if (!PyDict_Check(d)) {
            PyErr_SetString(PyExc_TypeError, "run_units: properties must be dicts");
            goto done;
        }
        int64_t code;
        if (tags_code(d, &code) < 0)
            goto done;
        put_unit(u, phys, size_at[i], code);
        if (index_on) {
            PyObject *at = PyLong_FromLongLong(phys);
            int bad = !at || record_keys(d, prefix, at, NULL, keys, key_phys, NULL) < 0;
            Py_XDECREF(at);
            if (bad)
                goto done;
        }
        phys += size_at[i];
    }
    result = PyTuple_Pack(3, units, keys, key_phys);
done:
    Py_XDECREF(units);
    Py_XDECREF(keys);
    Py_XDECREF(key_phys);
    PyBuffer_Release(&sizes);
    return result;
}

/* pending_units(pending, index_on, schedule_topic) -> (queues, keys, key_phys, key_ts) | None
 * The dispatch of single puts' pending records, each the put path's 8-tuple (topic, queue_id,
 * properties, offset, size, queue offset, store time, transaction type): queues maps (topic,
 * queue_id) to [units, first queue offset, next queue offset], units a bytearray of 20-byte
 * consume queue units (commit log offset, size, tags code: the Java hashCode of TAGS, 0 without),
 * none for a prepared or rolled-back transaction; keys, key_phys and key_ts are the index keys
 * in order with their records' offsets and store times (none for a rollback). None when the
 * pending list holds anything else (a run, a record of schedule_topic, whose tags code is its
 * delivery time, a queue whose offsets do not follow on): the Python path dispatches those. */
PyObject *pending_units(PyObject *self, PyObject *args)
{
    PyObject *pending, *schedule_topic;
    int index_on;
    if (!PyArg_ParseTuple(args, "O!pU", &PyList_Type, &pending, &index_on, &schedule_topic))
        return NULL;
    PyObject *queues = PyDict_New(), *keys = PyList_New(0), *key_phys = PyList_New(0),
             *key_ts = PyList_New(0), *prefixes = PyDict_New(), *result = NULL;
    if (!queues || !keys || !key_phys || !key_ts || !prefixes)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(pending);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(pending, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 8)
            goto not_here;
        PyObject *topic = PyTuple_GET_ITEM(item, 0), *props = PyTuple_GET_ITEM(item, 2);
        if (!PyUnicode_Check(topic) || !PyDict_Check(props))
            goto not_here;
        int scheduled = PyUnicode_Compare(topic, schedule_topic);
        if (scheduled == -1 && PyErr_Occurred())
            goto done;
        if (scheduled == 0)
            goto not_here;
        long long phys = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 3)), size = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 4)),
                  queue_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 5)), tx = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 7));
        if (PyErr_Occurred())
            goto done;
        if (tx != TRANSACTION_PREPARED && tx != TRANSACTION_ROLLBACK) {
            PyObject *key = PyTuple_GetSlice(item, 0, 2);
            if (!key)
                goto done;
            PyObject *queue = PyDict_GetItemWithError(queues, key);
            if (!queue) {
                if (PyErr_Occurred() || !(queue = Py_BuildValue("[NLL]", PyByteArray_FromStringAndSize(NULL, 0),
                                                                queue_offset, queue_offset))) {
                    Py_DECREF(key);
                    goto done;
                }
                int bad = PyDict_SetItem(queues, key, queue) < 0;
                Py_DECREF(queue);
                if (bad) {
                    Py_DECREF(key);
                    goto done;
                }
            }
            Py_DECREF(key);
            if (PyLong_AsLongLong(PyList_GET_ITEM(queue, 2)) != queue_offset) {
                if (PyErr_Occurred())
                    goto done;
                goto not_here;
            }
            int64_t code;
            if (tags_code(props, &code) < 0)
                goto done;
            PyObject *units = PyList_GET_ITEM(queue, 0), *next = PyLong_FromLongLong(queue_offset + 1);
            Py_ssize_t len = PyByteArray_GET_SIZE(units);
            if (!next || PyByteArray_Resize(units, len + 20) < 0) {
                Py_XDECREF(next);
                goto done;
            }
            PyList_SetItem(queue, 2, next);
            unsigned char *u = (unsigned char *)PyByteArray_AS_STRING(units) + len;
            put_unit(u, phys, size, code);
        }
        if (index_on && tx != TRANSACTION_ROLLBACK) {
            PyObject *prefix = PyDict_GetItemWithError(prefixes, topic);
            if (!prefix) {
                if (PyErr_Occurred() || !(prefix = PyUnicode_FromFormat("%U#", topic)))
                    goto done;
                int bad = PyDict_SetItem(prefixes, topic, prefix) < 0;
                Py_DECREF(prefix);
                if (bad)
                    goto done;
            }
            if (record_keys(props, prefix, PyTuple_GET_ITEM(item, 3), PyTuple_GET_ITEM(item, 6), keys, key_phys,
                            key_ts) < 0)
                goto done;
        }
    }
    result = PyTuple_Pack(4, queues, keys, key_phys, key_ts);
    goto done;
not_here:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(queues);
    Py_XDECREF(keys);
    Py_XDECREF(key_phys);
    Py_XDECREF(key_ts);
    Py_XDECREF(prefixes);
    return result;
}
