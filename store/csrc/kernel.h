/* What the store kernel's C files share: the record and index layouts, the interned attribute and
 * property names (made in module.c), big-endian readers and writers, Java's int range and
 * String.hashCode, and the functions module.c puts in the module. */
#ifndef MQTOOL_STORE_KERNEL_H
#define MQTOOL_STORE_KERNEL_H

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
#define MESSAGE_MAGIC_V2 0xDAA320ABu
#define RECORD_HEAD 36           /* totalSize .. physicalOffset: what a consume queue unit is checked against */
#define HOSTS_V6 0x30            /* BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG */
#define TRANSACTION_TYPE_MASK 0xC
#define TRANSACTION_PREPARED 0x4
#define TRANSACTION_ROLLBACK 0xC

#define N_SHARED 7               /* a message's fields a run shares, in this order: */
enum {TOPIC, QUEUE_ID, SYS_FLAG, BORN_HOST, BORN_TIMESTAMP, RECONSUME_TIMES, PREPARED_OFFSET};
extern PyObject *shared_names[N_SHARED];
enum {ROW_BODY = N_SHARED, ROW_TEXT, ROW_PROPS, ROW_FLAG, ROW_SIZE};   /* put_one's row: the shared fields, then these */
extern PyObject *s_body, *s_text, *s_flag, *s_props, *s_tags, *s_keys, *s_uniq_key, *s_space, *s_wait, *s_cluster;

static inline void put32(unsigned char *p, uint32_t v)
{
    p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}

static inline void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static inline int64_t get64(const unsigned char *p)
{
    return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 | (uint64_t)p[3] << 32 |
                     (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 | (uint64_t)p[6] << 8 | p[7]);
}

static inline int32_t get32(const unsigned char *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

/* p (a PyMem block) resized to hold n of *p: 0, or -1 with MemoryError (p left as it was). */
#define GROW(p, n) __extension__ ({                                       \
    void *grown_ = PyMem_Realloc((p), (size_t)(n) * sizeof *(p));         \
    if (grown_)                                                           \
        (p) = grown_;                                                     \
    else                                                                  \
        PyErr_NoMemory();                                                 \
    grown_ ? 0 : -1;                                                      \
})

/* One consume queue unit (20 bytes, big-endian): commit log offset, size, tags code. */
static inline void put_unit(unsigned char *u, long long phys, int64_t size, int64_t code)
{
    put64(u, (uint64_t)phys);
    put32(u + 8, (uint32_t)size);
    put64(u + 12, (uint64_t)code);
}

/* A run's record header at out: the shared row with the record's own fields filled in. */
static inline void put_head(unsigned char *out, const void *row, int64_t size, int32_t crc, int32_t flag,
                            long long queue_offset, long long phys, long long store_ts, Py_ssize_t body_len)
{
    memcpy(out, row, FIXED_SIZE);
    put32(out + AT_SIZE, (uint32_t)size);
    put32(out + AT_CRC, (uint32_t)crc);
    put32(out + AT_FLAG, (uint32_t)flag);
    put64(out + AT_QUEUE_OFFSET, (uint64_t)queue_offset);
    put64(out + AT_PHYSICAL_OFFSET, (uint64_t)phys);
    put64(out + AT_STORE_TIMESTAMP, (uint64_t)store_ts);
    put32(out + AT_BODY_LENGTH, (uint32_t)body_len);
}

/* A Java int or long from a Python int: 1, or 0 when it is not one (no error set), or -1 on error. */
static inline int java_int(PyObject *o, long long lo, long long hi, long long *out)
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

/* Java's String.hashCode of s over its UTF-16 code units, continuing from h. */
static inline uint32_t java_hash(uint32_t h, PyObject *s)
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

PyObject *put_one(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *put_quick(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *put_run_quick(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
int quick_init(void);
int quickrun_init(void);

/* What quick.c's puts share (quickrun.c's too): the commit log's last file, the clock, the put lock. */
struct quick_tail {
    PyObject *file, *mm;
    long long pos, size, warm_lo, start;
};
int quick_tail(PyObject *files, struct quick_tail *t);
void quick_tail_clear(struct quick_tail *t);
long long quick_clock(PyObject *clock);
int quick_lock(PyObject *lock);
int quick_unlock(PyObject *lock);
int quick_moved(PyObject *file, long long pos, long long store_ts);
int quick_told(PyObject *listeners, long long end);
void quick_id(char *d, const char *prefix, Py_ssize_t prefix_len, unsigned long long phys);
PyObject *run_prepare(PyObject *self, PyObject *args);
PyObject *run_write(PyObject *self, PyObject *args);
PyObject *msg_ids(PyObject *self, PyObject *args);
PyObject *run_units(PyObject *self, PyObject *args);
PyObject *pending_units(PyObject *self, PyObject *args);
PyObject *index_put(PyObject *self, PyObject *args);
PyObject *parse_properties(PyObject *self, PyObject *text);
PyObject *broker_properties(PyObject *self, PyObject *args);
PyObject *queue_totals(PyObject *self, PyObject *args);
PyObject *pull_body(PyObject *self, PyObject *args);
PyObject *batch_entries(PyObject *self, PyObject *args);
PyObject *batch_run(PyObject *self, PyObject *args);
PyObject *batch_spans(PyObject *self, PyObject *args);
PyObject *frame_write(PyObject *self, PyObject *args);
PyObject *frame_units(PyObject *self, PyObject *args);
PyObject *populate(PyObject *self, PyObject *args);
PyObject *dump_lines(PyObject *self, PyObject *args);

#endif
