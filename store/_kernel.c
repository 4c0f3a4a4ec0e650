/* The store's compiled kernel: the loops of a batch put and of index writing, byte for byte
 * what the pure-Python paths write (store/kernel.py says which is used; the tests compare both).
 *
 *   put_one      one message put: checked, placed, written into the map and queued for dispatch
 *   run_prepare  a batch's messages as one run: shared fields checked, sizes and body CRCs
 *   run_write    the placed run copied into the mapped file
 *   msg_ids      the run's message ids: the store host prefix + each record's offset in hex
 *   run_units    a placed run's consume queue units and index keys (the dispatch)
 *   pending_units  the same for single puts' pending records, grouped by queue
 *   queue_totals `store stats`: per (topic, queue) totals of a chunk of records
 *   parse_properties  a record's properties string as a dict (every put and read decodes them)
 *   index_put    IndexFile.putKey for many keys in order, into a mapped index file
 *
 * Layouts: spec/commitlog.md (a V1 record with IPv4 hosts: an 88-byte fixed part), spec/index.md.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FIXED_SIZE 88            /* TOTALSIZE .. BODYLENGTH of a V1 record with IPv4 hosts */
#define MAX_PROPS 32767
#define INDEX_HEADER_SIZE 40
#define INDEX_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20

/* Offsets in the fixed part of the fields a run fills per record. */
#define AT_SIZE 0
#define AT_CRC 8
#define AT_FLAG 16
#define AT_QUEUE_OFFSET 20
#define AT_PHYSICAL_OFFSET 28
#define AT_STORE_TIMESTAMP 56
#define AT_BODY_LENGTH 84
#define AT_MAGIC 4
#define AT_QUEUE_ID 12
#define AT_SYS_FLAG 36
#define AT_BORN_TIMESTAMP 40
#define AT_BORN_HOST 48
#define AT_STORE_HOST 64
#define AT_RECONSUME_TIMES 72
#define AT_PREPARED_OFFSET 76

#define MESSAGE_MAGIC 0xDAA320A7u
#define HOSTS_V6 0x30            /* BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG */
#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_PREPARED 0x4
#define TRANSACTION_ROLLBACK 0xC

static const char *SHARED[] = {"topic", "queue_id", "sys_flag", "born_host", "born_timestamp",
                               "reconsume_times", "prepared_transaction_offset"};
#define N_SHARED 7
enum {TOPIC, QUEUE_ID, SYS_FLAG, BORN_HOST, BORN_TIMESTAMP, RECONSUME_TIMES, PREPARED_OFFSET};
static PyObject *shared_names[N_SHARED];
static PyObject *s_body, *s_text, *s_flag, *s_props, *s_tags, *s_keys, *s_uniq_key, *s_space;

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* A Java int or long from a Python int: 1, or 0 when it is not one (no error set), or -1 on error. */
static int java_int(PyObject *o, long long lo, long long hi, long long *out)
{
    if (!PyLong_Check(o))
        return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

/* put_one(msg, buf, pos, room, phys, store_ts, topic_fields, store_host, crc, max_body, table, pending)
 *   -> (size, queue_offset) | None
 * One message written as a V1 record with IPv4 hosts at buf[pos:] (commit log offset phys), the
 * record ending at or before `room`; its queue offset taken from `table` ((topic, queue_id) -> next
 * offset) unless it is a prepared or rolled-back transaction (0, as CommitLog does), and the
 * record queued for dispatch on `pending` as the put path's 8-tuple. topic_fields maps a topic to
 * its TOPICLENGTH + TOPIC bytes, store_host is the store's 4-byte address and port (8 bytes).
 * None, with nothing changed, for anything the Python path handles: a topic not in topic_fields,
 * a body not bytes or over max_body, no properties text or no properties dict for it, properties
 * over 32767 bytes or not UTF-8, IPv6 hosts or their flags, a field that is not a Java int or long,
 * a record that does not fit before `room`. */
static PyObject *put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
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
    for (int k = 0; k < N_SHARED; k++)
        if (!(field[k] = PyObject_GetAttr(msg, shared_names[k])))
            goto done;
    if (!(body = PyObject_GetAttr(msg, s_body)) || !(text = PyObject_GetAttr(msg, s_text)) ||
            !(props = PyObject_GetAttr(msg, s_props)))
        goto done;
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
    PyObject *flag_obj = PyObject_GetAttr(msg, s_flag);
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

/* run_prepare(msgs, max_body, fixed, crc) -> (total, sizes, crcs, props, parts, flags) | None
 * sizes: native int64 per record, crcs: native int32 (masked to 31 bits), props: each message's
 * properties dict, parts: [body, properties text] per record in one list, flags: native int32.
 * None when the messages are not a run for this path: a shared field differs, a body is not
 * bytes or longer than max_body, a properties text is missing or longer than 32767 bytes, a
 * properties dict is empty (the caller's Python path fills those in), a flag is not a Java int. */
static PyObject *run_prepare(PyObject *self, PyObject *args)
{
    PyObject *msgs, *crc;
    Py_ssize_t max_body, fixed;
    if (!PyArg_ParseTuple(args, "O!nnO", &PyList_Type, &msgs, &max_body, &fixed, &crc))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    if (n == 0)
        Py_RETURN_NONE;
    PyObject *first[N_SHARED] = {0};
    PyObject *sizes = PyBytes_FromStringAndSize(NULL, n * 8);
    PyObject *crcs = PyBytes_FromStringAndSize(NULL, n * 4);
    PyObject *props = PyList_New(n);
    PyObject *parts = PyList_New(2 * n);
    PyObject *flags = PyBytes_FromStringAndSize(NULL, n * 4);
    PyObject *result = NULL;
    if (!sizes || !crcs || !props || !parts || !flags)
        goto done;
    int64_t *size_at = (int64_t *)PyBytes_AS_STRING(sizes);
    int32_t *crc_at = (int32_t *)PyBytes_AS_STRING(crcs);
    int32_t *flag_at = (int32_t *)PyBytes_AS_STRING(flags);
    long long total = 0;
    for (int k = 0; k < N_SHARED; k++) {
        first[k] = PyObject_GetAttr(PyList_GET_ITEM(msgs, 0), shared_names[k]);
        if (!first[k])
            goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        if (i > 0) {
            for (int k = 0; k < N_SHARED; k++) {
                PyObject *v = PyObject_GetAttr(m, shared_names[k]);
                if (!v)
                    goto done;
                int same = PyObject_RichCompareBool(v, first[k], Py_EQ);
                Py_DECREF(v);
                if (same < 0)
                    goto done;
                if (!same)
                    goto not_a_run;
            }
        }
        PyObject *d = PyObject_GetAttr(m, s_props);
        if (!d)
            goto done;
        PyList_SET_ITEM(props, i, d);
        if (!PyDict_Check(d) || PyDict_GET_SIZE(d) == 0)
            goto not_a_run;
        PyObject *body = PyObject_GetAttr(m, s_body);
        if (!body)
            goto done;
        PyObject *text = PyObject_GetAttr(m, s_text);
        if (!text) {
            Py_DECREF(body);
            goto done;
        }
        PyList_SET_ITEM(parts, 2 * i, body);
        PyList_SET_ITEM(parts, 2 * i + 1, text);
        Py_ssize_t body_len = PyBytes_Check(body) ? PyBytes_GET_SIZE(body) : -1;
        Py_ssize_t text_len = -1;
        if (PyUnicode_Check(text) && !PyUnicode_AsUTF8AndSize(text, &text_len))
            goto done;
        if (body_len < 0 || body_len > max_body || text_len < 0 || text_len > MAX_PROPS)
            goto not_a_run;
        PyObject *flag = PyObject_GetAttr(m, s_flag);
        if (!flag)
            goto done;
        long long flag_value;
        int ok = java_int(flag, INT32_MIN, INT32_MAX, &flag_value);
        Py_DECREF(flag);
        if (ok < 0)
            goto done;
        if (!ok)
            goto not_a_run;                 /* the general path refuses it as struct.pack does */
        flag_at[i] = (int32_t)flag_value;
        PyObject *c = PyObject_CallOneArg(crc, body);
        if (!c)
            goto done;
        unsigned long v = PyLong_AsUnsignedLongMask(c);
        Py_DECREF(c);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            goto done;
        crc_at[i] = (int32_t)(v & 0x7FFFFFFF);
        size_at[i] = fixed + body_len + text_len;
        total += size_at[i];
    }
    result = Py_BuildValue("LOOOOO", total, sizes, crcs, props, parts, flags);
    goto done;
not_a_run:
    result = Py_NewRef(Py_None);
done:
    for (int k = 0; k < N_SHARED; k++)
        Py_XDECREF(first[k]);
    Py_XDECREF(sizes);
    Py_XDECREF(crcs);
    Py_XDECREF(props);
    Py_XDECREF(parts);
    Py_XDECREF(flags);
    return result;
}

struct piece {
    const char *body;
    Py_ssize_t body_len;
    const char *text;
    Py_ssize_t text_len;
};

/* run_write(parts, flags, buf, pos, row, topic_part, sizes, crcs, phys, queue_offset, store_ts)
 * Writes the run at buf[pos:]: per record the 88-byte row with its size, CRC, flag, queue offset,
 * commit log offset, store time and body length filled in, the body, topic_part (TOPICLENGTH +
 * TOPIC), PROPERTIESLENGTH and the properties. parts, flags, sizes and crcs are run_prepare's. */
static PyObject *run_write(PyObject *self, PyObject *args)
{
    PyObject *parts, *buf_obj;
    Py_ssize_t pos;
    Py_buffer row, topic, sizes, crcs, flags;
    long long phys, queue_offset, store_ts;
    if (!PyArg_ParseTuple(args, "O!y*Ony#y#y*y*LLL", &PyList_Type, &parts, &flags, &buf_obj, &pos, &row.buf,
                          &row.len, &topic.buf, &topic.len, &sizes, &crcs, &phys, &queue_offset, &store_ts))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(parts) / 2;
    PyObject *result = NULL;
    struct piece *pieces = NULL;
    Py_buffer buf = {0};
    const int32_t *flag_at = flags.buf;
    if (row.len != FIXED_SIZE || PyList_GET_SIZE(parts) != 2 * n || sizes.len != n * 8 || crcs.len != n * 4 ||
            flags.len != n * 4) {
        PyErr_SetString(PyExc_ValueError, "run_write: row, sizes, crcs or flags do not match the records");
        goto release;
    }
    if (PyObject_GetBuffer(buf_obj, &buf, PyBUF_WRITABLE) < 0)
        goto release;
    const int64_t *size_at = sizes.buf;
    const int32_t *crc_at = crcs.buf;
    long long total = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        total += size_at[i];
    if (pos < 0 || pos + total > buf.len) {
        PyErr_SetString(PyExc_ValueError, "run_write: the run does not fit the buffer");
        goto release;
    }
    pieces = PyMem_Malloc(n ? n * sizeof *pieces : 1);
    if (!pieces) {
        PyErr_NoMemory();
        goto release;
    }
    /* Borrow each body and properties text (the list keeps them alive). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *body = PyList_GET_ITEM(parts, 2 * i), *text = PyList_GET_ITEM(parts, 2 * i + 1);
        int ok = PyBytes_Check(body) && PyUnicode_Check(text);
        if (ok) {
            pieces[i].body = PyBytes_AS_STRING(body);
            pieces[i].body_len = PyBytes_GET_SIZE(body);
            pieces[i].text = PyUnicode_AsUTF8AndSize(text, &pieces[i].text_len);
            ok = pieces[i].text &&
                 size_at[i] == FIXED_SIZE + topic.len + 2 + pieces[i].body_len + pieces[i].text_len;
        }
        if (!ok) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "run_write: a record's parts do not match its size");
            goto release;
        }
    }
    unsigned char *out = (unsigned char *)buf.buf + pos;
    /* The GIL stays held: given up around a copy this short, it came back only after the
     * dispatch thread's next switch interval (measured slower). */
    long long at = phys;
    for (Py_ssize_t i = 0; i < n; i++) {
        struct piece *p = &pieces[i];
        memcpy(out, row.buf, FIXED_SIZE);
        put32(out + AT_SIZE, (uint32_t)size_at[i]);
        put32(out + AT_CRC, (uint32_t)crc_at[i]);
        put32(out + AT_FLAG, (uint32_t)flag_at[i]);
        put64(out + AT_QUEUE_OFFSET, (uint64_t)(queue_offset + i));
        put64(out + AT_PHYSICAL_OFFSET, (uint64_t)at);
        put64(out + AT_STORE_TIMESTAMP, (uint64_t)store_ts);
        put32(out + AT_BODY_LENGTH, (uint32_t)p->body_len);
        unsigned char *q = out + FIXED_SIZE;
        memcpy(q, p->body, p->body_len);
        q += p->body_len;
        memcpy(q, topic.buf, topic.len);
        q += topic.len;
        q[0] = (unsigned char)(p->text_len >> 8);
        q[1] = (unsigned char)p->text_len;
        memcpy(q + 2, p->text, p->text_len);
        out += size_at[i];
        at += size_at[i];
    }
    result = Py_NewRef(Py_None);
release:
    PyMem_Free(pieces);
    if (buf.obj)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&sizes);
    PyBuffer_Release(&crcs);
    PyBuffer_Release(&flags);
    return result;
}

/* msg_ids(prefix, phys, sizes) -> [prefix + "%016X" % offset, ...] for the run's records. */
static PyObject *msg_ids(PyObject *self, PyObject *args)
{
    const char *prefix;
    Py_ssize_t prefix_len;
    long long phys;
    Py_buffer sizes;
    if (!PyArg_ParseTuple(args, "s#Ly*", &prefix, &prefix_len, &phys, &sizes))
        return NULL;
    Py_ssize_t n = sizes.len / 8;
    const int64_t *size_at = sizes.buf;
    for (Py_ssize_t k = 0; k < prefix_len; k++)
        if ((unsigned char)prefix[k] > 127) {
            PyErr_SetString(PyExc_ValueError, "msg_ids: the prefix must be ASCII (hex digits)");
            PyBuffer_Release(&sizes);
            return NULL;
        }
    PyObject *ids = PyList_New(n);
    static const char hex[] = "0123456789ABCDEF";
    for (Py_ssize_t i = 0; ids && i < n; i++) {
        PyObject *s = PyUnicode_New(prefix_len + 16, 127);
        if (!s) {
            Py_CLEAR(ids);
            break;
        }
        char *d = (char *)PyUnicode_DATA(s);
        memcpy(d, prefix, prefix_len);
        uint64_t v = (uint64_t)phys;
        for (int k = 15; k >= 0; k--, v >>= 4)
            d[prefix_len + k] = hex[v & 15];
        PyList_SET_ITEM(ids, i, s);
        phys += size_at[i];
    }
    PyBuffer_Release(&sizes);
    return ids;
}

/* Java's String.hashCode of s over its UTF-16 code units, continuing from h. */
static uint32_t java_hash(uint32_t h, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            c = 0xDC00 + (c & 0x3FF);
        }
        h = 31 * h + c;
    }
    return h;
}

/* index_put(buf, slots, max_entries, index_count, begin_ts, keys, phys, stamps) -> new hash slots
 * IndexFile.putKey for each key (a str: "topic#key") in order, the entries appended after
 * index_count; phys and stamps are native int64 arrays, one per key. The caller has checked that
 * they fit (index_count + len(keys) <= max_entries) and updates the header. */
static PyObject *index_put(PyObject *self, PyObject *args)
{
    PyObject *buf_obj, *keys;
    Py_ssize_t slots, max_entries, count;
    long long begin_ts;
    Py_buffer phys, stamps, buf = {0};
    if (!PyArg_ParseTuple(args, "OnnnLO!y*y*", &buf_obj, &slots, &max_entries, &count, &begin_ts,
                          &PyList_Type, &keys, &phys, &stamps))
        return NULL;
    PyObject *result = NULL;
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
    long long new_slots = 0;
    for (Py_ssize_t i = 0; i < k; i++, count++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "index_put: keys must be str");
            goto release;
        }
        int32_t h = (int32_t)java_hash(0, key);
        /* abs(); Integer.MIN_VALUE stays negative in Java and indexKeyHashMethod makes it 0 */
        int32_t key_hash = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
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
    if (buf.obj)
        PyBuffer_Release(&buf);
    PyBuffer_Release(&phys);
    PyBuffer_Release(&stamps);
    return result;
}

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
static PyObject *run_units(PyObject *self, PyObject *args)
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
        put64(u, (uint64_t)phys);
        put32(u + 8, (uint32_t)size_at[i]);
        put64(u + 12, (uint64_t)code);
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
static PyObject *pending_units(PyObject *self, PyObject *args)
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
            put64(u, (uint64_t)phys);
            put32(u + 8, (uint32_t)size);
            put64(u + 12, (uint64_t)code);
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

/* parse_properties(text) -> dict: MessageDecoder.string2messageProperties. Pieces split on 0x02;
 * a piece is kept when both sides of its first 0x01 are non-empty; the last duplicate wins. */
static PyObject *parse_properties(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "parse_properties: text must be str");
        return NULL;
    }
    PyObject *props = PyDict_New();
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), start = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    while (props && start < n) {
        Py_ssize_t end = start, eq = -1;
        for (; end < n; end++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, end);
            if (c == 0x02)
                break;
            if (c == 0x01 && eq < 0)
                eq = end;
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

/* The per-(topic, queue) totals of `store stats`: one hash table entry per distinct topic bytes
 * and queue id, the topic compared by its bytes in the buffer. */
struct total {
    uint64_t hash;
    int64_t topic_pos, messages, bytes, min_queue_offset, max_queue_offset, first_store_time, last_store_time;
    int32_t topic_len, queue_id, used;
};

static int64_t get64(const unsigned char *p)
{
    return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
                     (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | p[7]);
}

static int32_t get32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

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
static PyObject *queue_totals(PyObject *self, PyObject *args)
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

static PyMethodDef methods[] = {
    {"put_one", (PyCFunction)(void (*)(void))put_one, METH_FASTCALL, "One message put into the map: (size, queue offset) or None."},
    {"pending_units", pending_units, METH_VARARGS, "Single puts' consume queue units by queue and their index keys."},
    {"parse_properties", parse_properties, METH_O, "A properties string as a dict (string2messageProperties)."},
    {"queue_totals", queue_totals, METH_VARARGS, "Per (topic, queue) totals of a header table's records."},
    {"run_units", run_units, METH_VARARGS, "A placed run's consume queue units and index keys."},
    {"run_prepare", run_prepare, METH_VARARGS, "A batch's messages as a run: (total, sizes, crcs) or None."},
    {"run_write", run_write, METH_VARARGS, "Write a placed run into a writable buffer."},
    {"msg_ids", msg_ids, METH_VARARGS, "The run's message ids."},
    {"index_put", index_put, METH_VARARGS, "IndexFile.putKey for many keys; returns the new hash slots."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernel", NULL, -1, methods};

PyMODINIT_FUNC PyInit__kernel(void)
{
    for (int k = 0; k < N_SHARED; k++)
        if (!(shared_names[k] = PyUnicode_InternFromString(SHARED[k])))
            return NULL;
    if (!(s_body = PyUnicode_InternFromString("body")) || !(s_text = PyUnicode_InternFromString("properties_text")) ||
        !(s_flag = PyUnicode_InternFromString("flag")) || !(s_props = PyUnicode_InternFromString("properties")) || !(s_tags = PyUnicode_InternFromString("TAGS")) ||
        !(s_keys = PyUnicode_InternFromString("KEYS")) || !(s_uniq_key = PyUnicode_InternFromString("UNIQ_KEY")) ||
        !(s_space = PyUnicode_InternFromString(" ")))
        return NULL;
    return PyModule_Create(&module);
}
