/* A single message put (MessageStore.put with the store kernel). */
#include "kernel.h"

/* put_one(msg, buf, pos, room, phys, store_ts, topic_fields, store_host, crc, max_body, table, pending)
 *   -> (size, queue_offset) | None
 * `msg` is a Message or a row: a tuple of its fields (the shared ones in kernel.h's order, then
 * body, properties text, properties and flag: the send fast path's, made without a Message).
 * One message written as a V1 record with IPv4 hosts at buf[pos:] (commit log offset phys), the
 * record ending at or before `room`; its queue offset taken from `table` ((topic, queue_id) -> next
 * offset) unless it is a prepared or rolled-back transaction (0, as CommitLog does), and the
 * record queued for dispatch on `pending` as the put path's 8-tuple. topic_fields maps a topic to
 * its TOPICLENGTH + TOPIC bytes, store_host is the store's 4-byte address and port (8 bytes).
 * None, with nothing changed, for anything the Python path handles: a topic not in topic_fields,
 * a body not bytes or over max_body, no properties text or no properties dict for it, properties
 * over 32767 bytes or not UTF-8, IPv6 hosts or their flags, a field that is not a Java int or long,
 * a record that does not fit before `room`. */
PyObject *put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "put_one takes 12 arguments");
        return NULL;
    }
    PyObject *msg = args[0], *buf_obj = args[1], *topic_fields = args[6], *store_host = args[7],
             *crc = args[8], *table = args[10], *pending = args[11];
    Py_ssize_t pos = PyLong_AsSsize_t(args[2]), room = PyLong_AsSsize_t(args[3]),
               max_body = PyLong_AsSsize_t(args[9]);
    long long phys = PyLong_AsLongLong(args[4]), store_ts = PyLong_AsLongLong(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_Check(topic_fields) || !PyDict_Check(table) || !PyList_Check(pending) ||
            !PyBytes_Check(store_host) || PyBytes_GET_SIZE(store_host) != 8) {
        PyErr_SetString(PyExc_TypeError, "put_one: topic_fields and table must be dicts, pending a list, "
                                         "store_host 8 bytes");
        return NULL;
    }
    PyObject *field[N_SHARED] = {0}, *body = NULL, *text = NULL, *props = NULL, *result = NULL;
    long long value[N_SHARED] = {0}, flag = 0;
    Py_buffer buf = {0};
    int row = PyTuple_Check(msg);
    if (row && PyTuple_GET_SIZE(msg) != ROW_SIZE) {
        PyErr_SetString(PyExc_TypeError, "put_one: a row has the shared fields, body, text, properties and flag");
        return NULL;
    }
    for (int k = 0; k < N_SHARED; k++)
        if (!(field[k] = row ? Py_NewRef(PyTuple_GET_ITEM(msg, k)) : PyObject_GetAttr(msg, shared_names[k])))
            goto done;
    if (row) {
        body = Py_NewRef(PyTuple_GET_ITEM(msg, ROW_BODY));
        text = Py_NewRef(PyTuple_GET_ITEM(msg, ROW_TEXT));
        props = Py_NewRef(PyTuple_GET_ITEM(msg, ROW_PROPS));
    } else if (!(body = PyObject_GetAttr(msg, s_body)) || !(text = PyObject_GetAttr(msg, s_text)) ||
               !(props = PyObject_GetAttr(msg, s_props))) {
        goto done;
    }
    PyObject *topic_part = PyDict_GetItemWithError(topic_fields, field[TOPIC]);
    if (!topic_part) {
        if (PyErr_Occurred())
            goto done;
        goto not_here;
    }
    if (!PyBytes_Check(topic_part) || !PyBytes_Check(body) || PyBytes_GET_SIZE(body) > max_body ||
            !PyUnicode_Check(text) || !PyDict_Check(props))
        goto not_here;
    Py_ssize_t text_len;
    const char *text_at = PyUnicode_AsUTF8AndSize(text, &text_len);
    if (!text_at) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeError))
            goto done;
        PyErr_Clear();              /* the Python path raises it */
        goto not_here;
    }
    if (text_len > MAX_PROPS || (text_len > 0 && PyDict_GET_SIZE(props) == 0))
        goto not_here;              /* refused there, or its dict parsed there */
    PyObject *host = field[BORN_HOST];
    if (!PyTuple_Check(host) || PyTuple_GET_SIZE(host) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(host, 0)) ||
            PyBytes_GET_SIZE(PyTuple_GET_ITEM(host, 0)) != 4)
        goto not_here;
    static const long long lo[N_SHARED] = {0, INT32_MIN, INT32_MIN, 0, INT64_MIN, INT32_MIN, INT64_MIN};
    static const long long hi[N_SHARED] = {0, INT32_MAX, INT32_MAX, 0, INT64_MAX, INT32_MAX, INT64_MAX};
    long long born_port;
    for (int k = QUEUE_ID; k < N_SHARED; k++) {
        int ok = k == BORN_HOST ? java_int(PyTuple_GET_ITEM(host, 1), INT32_MIN, INT32_MAX, &born_port)
                                : java_int(field[k], lo[k], hi[k], &value[k]);
        if (ok < 0)
            goto done;
        if (!ok)
            goto not_here;
    }
    PyObject *flag_obj = row ? Py_NewRef(PyTuple_GET_ITEM(msg, ROW_FLAG)) : PyObject_GetAttr(msg, s_flag);
    if (!flag_obj)
        goto done;
    int ok = java_int(flag_obj, INT32_MIN, INT32_MAX, &flag);
    Py_DECREF(flag_obj);
    if (ok < 0)
        goto done;
    if (!ok || value[SYS_FLAG] & HOSTS_V6)
        goto not_here;
    Py_ssize_t body_len = PyBytes_GET_SIZE(body), topic_len = PyBytes_GET_SIZE(topic_part);
    Py_ssize_t size = FIXED_SIZE + body_len + topic_len + 2 + text_len;
    if (pos < 0 || pos + size > room)
        goto not_here;
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        goto done;
    if (pos + size > buf.len) {
        PyErr_SetString(PyExc_ValueError, "put_one: room is past the end of the buffer");
        goto done;
    }
    PyObject *c = PyObject_CallOneArg(crc, body);
    if (!c)
        goto done;
    unsigned long body_crc = PyLong_AsUnsignedLongMask(c);
    Py_DECREF(c);
    if (body_crc == (unsigned long)-1 && PyErr_Occurred())
        goto done;
    /* The queue offset taken and the record queued before a byte is written: only these can fail. */
    long long tx = value[SYS_FLAG] & TRANSACTION_TYPE_MASK, queue_offset = 0;
    int counted = tx != TRANSACTION_PREPARED && tx != TRANSACTION_ROLLBACK;
    PyObject *key = NULL, *next = NULL, *after = NULL, *item = NULL;
    if (counted) {
        if (!(key = PyTuple_Pack(2, field[TOPIC], field[QUEUE_ID])))
            goto done;
        next = PyDict_GetItemWithError(table, key);
        if (next) {
            Py_INCREF(next);
            queue_offset = PyLong_AsLongLong(next);
        }
        if (!PyErr_Occurred())
            after = PyLong_FromLongLong(queue_offset + 1);
    }
    if (!PyErr_Occurred())
        item = Py_BuildValue("(OOOLnLLL)", field[TOPIC], field[QUEUE_ID], props, phys, size, queue_offset,
                             store_ts, tx);
    if (item)
        result = Py_BuildValue("(nL)", size, queue_offset);
    int failed = !result || (counted && PyDict_SetItem(table, key, after) < 0);
    if (!failed && PyList_Append(pending, item) < 0) {
        failed = 1;
        if (counted) {              /* as it was */
            PyObject *type, *val, *tb;
            PyErr_Fetch(&type, &val, &tb);
            if (next ? PyDict_SetItem(table, key, next) < 0 : PyDict_DelItem(table, key) < 0)
                PyErr_Clear();
            PyErr_Restore(type, val, tb);
        }
    }
    Py_XDECREF(key);
    Py_XDECREF(next);
    Py_XDECREF(after);
    Py_XDECREF(item);
    if (failed) {
        Py_CLEAR(result);
        goto done;
    }
    unsigned char *out = (unsigned char *)buf.buf + pos;
    const unsigned char *hosts = (const unsigned char *)PyBytes_AS_STRING(store_host);
    put32(out + AT_SIZE, (uint32_t)size);
    put32(out + AT_MAGIC, MESSAGE_MAGIC);
    put32(out + AT_CRC, (uint32_t)(body_crc & 0x7FFFFFFF));
    put32(out + AT_QUEUE_ID, (uint32_t)value[QUEUE_ID]);
    put32(out + AT_FLAG, (uint32_t)flag);
    put64(out + AT_QUEUE_OFFSET, (uint64_t)queue_offset);
    put64(out + AT_PHYSICAL_OFFSET, (uint64_t)phys);
    put32(out + AT_SYS_FLAG, (uint32_t)value[SYS_FLAG]);
    put64(out + AT_BORN_TIMESTAMP, (uint64_t)value[BORN_TIMESTAMP]);
    memcpy(out + AT_BORN_HOST, PyBytes_AS_STRING(PyTuple_GET_ITEM(host, 0)), 4);
    put32(out + AT_BORN_HOST + 4, (uint32_t)born_port);
    put64(out + AT_STORE_TIMESTAMP, (uint64_t)store_ts);
    memcpy(out + AT_STORE_HOST, hosts, 8);
    put32(out + AT_RECONSUME_TIMES, (uint32_t)value[RECONSUME_TIMES]);
    put64(out + AT_PREPARED_OFFSET, (uint64_t)value[PREPARED_OFFSET]);
    put32(out + AT_BODY_LENGTH, (uint32_t)body_len);
    unsigned char *q = out + FIXED_SIZE;
    memcpy(q, PyBytes_AS_STRING(body), body_len);
    q += body_len;
    memcpy(q, PyBytes_AS_STRING(topic_part), topic_len);
    q += topic_len;
    q[0] = (unsigned char)(text_len >> 8);
    q[1] = (unsigned char)text_len;
    memcpy(q + 2, text_at, text_len);
    goto done;
not_here:
    result = Py_NewRef(Py_None);
done:
    if (buf.obj)
        PyBuffer_Release(&buf);
    for (int k = 0; k < N_SHARED; k++)
        Py_XDECREF(field[k]);
    Py_XDECREF(body);
    Py_XDECREF(text);
    Py_XDECREF(props);
    return result;
}
