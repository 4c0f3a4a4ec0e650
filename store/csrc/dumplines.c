/* `store dump --json --body none` lines of plain records, written straight from the commit log's bytes:
 * byte for byte the lines store/dumpcols.py and store/dumpjson.py write (the tests compare the two).
 *
 * A record is plain here when store/dumpjson.py's own fast path would take it: 4.x magic code, IPv4
 * hosts, an uncompressed body, non-negative physical offset and body length, a topic and properties
 * that fill the record exactly, and properties of the form key 0x01 value (0x02 key 0x01 value)*
 * (0x02 at the very end allowed), no key twice, no key or value empty, every key, value and the topic
 * UTF-8 with nothing JSON escapes (no control character, '"' or '\\'). The walk hops from record to
 * record by TOTALSIZE, as dumpjson's record-by-record path does; the first record that is not plain,
 * or whose sysflag has no text in `sysflags`, ends the call, and the caller goes on from there.
 */
#include "kernel.h"

#define MSG_FIXED_SIZE_V4 91
#define COMPRESSED_FLAG 0x1
#define MAX_PAIRS 64

/* A word read from memory with its first byte lowest (plain_run finds bytes by their place in it). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define FIRST_LOW(x) __builtin_bswap64(x)
#else
#define FIRST_LOW(x) (x)
#endif

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* zlib's crc32 (IEEE polynomial), eight bytes a step. */
static uint32_t crc32_ieee(const unsigned char *p, Py_ssize_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; n -= 8, p += 8) {
        c ^= (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        c = crc_table[7][c & 0xFF] ^ crc_table[6][(c >> 8) & 0xFF] ^ crc_table[5][(c >> 16) & 0xFF] ^
            crc_table[4][c >> 24] ^ crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* Where the run of text json.dumps(ensure_ascii=False) writes as it is ends, from s[i] (i <= n): the
 * first byte that is a control character, '"' or '\\' (0x01 and 0x02, the separators, among them),
 * or n; -1 where the text is not UTF-8 as Python's strict decoder takes it. *ascii is cleared
 * when the run holds more than ASCII. Eight bytes at a time: the lowest byte a word flags is the
 * first one that is not plain ASCII (a borrow only reaches bytes above a flagged one), so its place
 * is found without a byte loop. The last bytes of the run are read as the word that ends at s[n],
 * shifted down: the zeros shifted in flag at n. (So the 8 bytes before s must be readable: both
 * callers' text lies after a record's fixed fields.) */
static inline Py_ssize_t plain_run(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, int *ascii)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (i < n) {
        uint64_t x;
        if (n - i >= 8) {
            memcpy(&x, s + i, 8);
            x = FIRST_LOW(x);
        } else {
            memcpy(&x, s + n - 8, 8);
            x = FIRST_LOW(x) >> 8 * (8 - (n - i));
        }
        uint64_t quote = x ^ (ones * '"'), slash = x ^ (ones * '\\');
        uint64_t odd = (x | ((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) | ((slash - ones) & ~slash)) & highs;
        if (!odd) {
            i += 8;
            continue;
        }
        i += __builtin_ctzll(odd) >> 3;
        if (i >= n)
            return n;
        unsigned char c = s[i];
        if (c < 0x80)
            return i;
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return -1;
        }
        if (i + len > n)
            return -1;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return -1;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return -1;
        *ascii = 0;
        i += len;
    }
    return n;
}

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int reserve(Out *o, Py_ssize_t more)
{
    if (o->len + more <= o->cap)
        return 0;
    Py_ssize_t cap = o->cap * 2 > o->len + more ? o->cap * 2 : o->len + more + 65536;
    char *p = PyMem_Realloc(o->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* The writers below take the output's cursor and return it moved on (a cursor in a local variable:
 * stores through it cannot change it, where o->len could be any byte a char store touched).
 * Short pieces (most of a line's) are copied inline, by two overlapping words. */
static inline char *put(char *d, const void *src, Py_ssize_t n)
{
    const char *s = src;
    if (n >= 8 && n <= 16) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4 && n < 8) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else if (n < 4) {
        for (Py_ssize_t i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        memcpy(d, s, n);
    }
    return d + n;
}

#define LIT(w, s) ((w) = put((w), (s), sizeof(s) - 1))

static const char PAIRS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* v (< 10000) without leading zeros. */
static inline char *put_small(char *d, uint32_t v)
{
    if (v < 10) {
        *d = (char)('0' + v);
        return d + 1;
    }
    if (v < 100)
        return (char *)memcpy(d, PAIRS + 2 * v, 2) + 2;
    uint32_t hi = v / 100, lo = v - hi * 100;
    if (hi < 10)
        *d++ = (char)('0' + hi);
    else
        d = (char *)memcpy(d, PAIRS + 2 * hi, 2) + 2;
    return (char *)memcpy(d, PAIRS + 2 * lo, 2) + 2;
}

/* v (< 10000) as four digits. */
static inline char *put_4(char *d, uint32_t v)
{
    uint32_t hi = v / 100;
    memcpy(d, PAIRS + 2 * hi, 2);
    memcpy(d + 2, PAIRS + 2 * (v - hi * 100), 2);
    return d + 4;
}

/* v (< 10^8) as eight digits: two independent halves, not one chain of divisions. */
static inline char *put_8(char *d, uint32_t v)
{
    uint32_t hi = v / 10000;
    put_4(d, hi);
    return put_4(d + 4, v - hi * 10000);
}

/* v (< 10^8) without leading zeros. */
static inline char *put_u32(char *d, uint32_t v)
{
    if (v < 10000)
        return put_small(d, v);
    uint32_t hi = v / 10000;
    return put_4(put_small(d, hi), v - hi * 10000);
}

static inline char *put_u64(char *d, uint64_t v)
{
    if (v < 100000000u)
        return put_u32(d, (uint32_t)v);
    uint64_t hi = v / 100000000u;
    uint32_t lo = (uint32_t)(v - hi * 100000000u);
    if (hi < 100000000u)
        d = put_u32(d, (uint32_t)hi);
    else {
        uint64_t top = hi / 100000000u;              /* < 10^4 (v < 2^64) */
        d = put_8(put_small(d, (uint32_t)top), (uint32_t)(hi - top * 100000000u));
    }
    return put_8(d, lo);
}

static inline char *put_i64(char *d, int64_t v)
{
    if (v < 0) {
        *d++ = '-';
        return put_u64(d, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(d, (uint64_t)v);
}

/* "a.b.c.d:port" (host_text of an IPv4 host). */
static inline char *put_host(char *d, const unsigned char *h)
{
    for (int k = 0; k < 4; k++) {
        if (k)
            *d++ = '.';
        d = put_small(d, h[k]);
    }
    *d++ = ':';
    return put_i64(d, get32(h + 4));
}

static inline char *put_hex(char *d, const unsigned char *s, int n)
{
    static const char digits[] = "0123456789ABCDEF";
    for (int k = 0; k < n; k++) {
        *d++ = digits[s[k] >> 4];
        *d++ = digits[s[k] & 15];
    }
    return d;
}

/* The last host written, its text and its hex (the msg_id's first half): a store's records mostly
 * share their two hosts. */
typedef struct {
    unsigned char raw[8];
    char text[32], hex[16];
    int len;
} HostText;

static inline char *put_host_cached(char *d, const unsigned char *h, HostText *c)
{
    if (c->len == 0 || memcmp(c->raw, h, 8) != 0) {
        memcpy(c->raw, h, 8);
        c->len = (int)(put_host(c->text, h) - c->text);
        put_hex(c->hex, h, 8);
    }
    return put(d, c->text, c->len);
}

/* dump_lines(buf, pos, end, stop, most, base, head, sysflags[, as_bytes]) -> (text, k, next): the
 * lines of the k plain records from buf[pos] on (k <= most; none at or past `stop`, none past `end`),
 * and where the next record starts; with as_bytes the text is their UTF-8 bytes (what the CLI writes
 * to its binary stdout: no str made, none encoded). base + position is a record's commit log offset; each line starts with `head`
 * (up to the commit log offset's value). `sysflags`: sysflag -> the line's text from "sys_flag" to
 * "compression"'s value, for the sysflags it knows. */
PyObject *dump_lines(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    long long pos, end, stop, most, base;
    PyObject *head, *sysflags;
    int as_bytes = 0;
    if (!PyArg_ParseTuple(args, "y*LLLLLUO!|p", &buf, &pos, &end, &stop, &most, &base, &head, &PyDict_Type, &sysflags,
                          &as_bytes))
        return NULL;
    static int ready;
    if (!ready) {
        crc_init();
        ready = 1;
    }
    Py_ssize_t head_len, k = 0, flag_len = 0;
    const char *head_text = PyUnicode_AsUTF8AndSize(head, &head_len), *flag_text = NULL;
    const unsigned char *b = buf.buf;
    long long last_sf = 1LL << 40;      /* (no int32 sysflag) */
    /* ASCII lines (the usual case) are written straight into the str returned, which grows as needed and
     * is cut to its length at the end. When the first record holds more than ASCII, the lines go to a
     * buffer kept for such calls (the GIL keeps calls apart) and are decoded from it; a later record
     * that does ends an ASCII call. Bytes (as_bytes) take any UTF-8 line: they are written straight into
     * the bytes object returned, likewise grown and cut. */
    static Out kept = {NULL, 0, 0};
    Out o = {NULL, 0, 0};
    PyObject *str = NULL, *result = NULL;
    int in_kept = 0;
    if (end > buf.len)
        end = buf.len;
    if (stop > end)
        stop = end;
    o.cap = (most < 4096 ? (most > 0 ? most : 1) : 4096) * 1024 + 1024;
    if (!head_text || !(str = as_bytes ? PyBytes_FromStringAndSize(NULL, o.cap) : PyUnicode_New(o.cap, 127)))
        goto done;
    o.p = as_bytes ? PyBytes_AS_STRING(str) : PyUnicode_DATA(str);
    HostText born_host = {.len = 0}, store_host = {.len = 0};
    Py_ssize_t key_at[MAX_PAIRS], key_len[MAX_PAIRS], val_at[MAX_PAIRS], val_len[MAX_PAIRS];
    for (; k < most && pos >= 0 && pos < stop && pos + FIXED_SIZE <= end; k++) {
        const unsigned char *r = b + pos;
        long long size = get32(r + AT_SIZE), phys = get64(r + AT_PHYSICAL_OFFSET), blen = get32(r + AT_BODY_LENGTH);
        int32_t sf = get32(r + AT_SYS_FLAG);
        if ((uint32_t)get32(r + AT_MAGIC) != MESSAGE_MAGIC || sf & (HOSTS_V6 | COMPRESSED_FLAG) ||
                size < MSG_FIXED_SIZE_V4 || pos + size > end || blen < 0 || phys < 0)
            break;
        long long rec_end = pos + size, te = pos + FIXED_SIZE + blen;
        if (te >= rec_end || b[te] >= 128)
            break;
        long long tl = b[te], pl = te + 1 + tl;
        if (pl + 2 > rec_end || b[pl] >= 128)
            break;
        long long plen = b[pl] << 8 | b[pl + 1];
        int ascii = 1;
        if (pl + 2 + plen != rec_end || plen == 0 || plain_run(b + te + 1, 0, tl, &ascii) != tl)
            break;
        /* the properties: pairs in order, each key and value plain, no key twice */
        const unsigned char *p = b + pl + 2;
        Py_ssize_t pairs = 0, i = 0;
        int ok = 1;
        while (ok && i < plen) {
            Py_ssize_t ks = i;
            i = plain_run(p, i, plen, &ascii);
            if (i <= ks || i >= plen || p[i] != 0x01 || pairs == MAX_PAIRS) {
                ok = 0;
                break;
            }
            Py_ssize_t vs = ++i;
            i = plain_run(p, i, plen, &ascii);
            if (i <= vs || (i < plen && p[i] != 0x02)) {
                ok = 0;
                break;
            }
            for (Py_ssize_t j = 0; j < pairs; j++)
                if (key_len[j] == vs - 1 - ks && memcmp(p + key_at[j], p + ks, key_len[j]) == 0)
                    ok = 0;
            key_at[pairs] = ks;
            key_len[pairs] = vs - 1 - ks;
            val_at[pairs] = vs;
            val_len[pairs++] = i - vs;
            i++;                        /* past the 0x02 (or the end) */
        }
        if (!ok)
            break;
        if (sf != last_sf) {
            PyObject *key = PyLong_FromLong(sf);
            PyObject *text = key ? PyDict_GetItemWithError(sysflags, key) : NULL;
            Py_XDECREF(key);
            if (!text) {
                if (PyErr_Occurred())
                    goto done;
                break;
            }
            if (!(flag_text = PyUnicode_AsUTF8AndSize(text, &flag_len)))
                goto done;
            last_sf = sf;
        }
        Py_ssize_t tags = -1, keys = -1, uniq = -1;
        for (Py_ssize_t j = 0; j < pairs; j++) {
            const unsigned char *name = p + key_at[j];
            if (key_len[j] == 4 && memcmp(name, "TAGS", 4) == 0)
                tags = j;
            else if (key_len[j] == 4 && memcmp(name, "KEYS", 4) == 0)
                keys = j;
            else if (key_len[j] == 8 && memcmp(name, "UNIQ_KEY", 8) == 0)
                uniq = j;
        }
        if (str && !ascii && !as_bytes) {
            if (k)
                break;
            Py_CLEAR(str);
            o = kept;
            o.len = 0;
            in_kept = 1;
        }
        Py_ssize_t bound = 1024 + head_len + flag_len + tl + 12 * plen;
        if (str && o.len + bound > o.cap) {
            Py_ssize_t cap = o.cap * 2 > o.len + bound ? o.cap * 2 : o.len + bound;
            if (as_bytes ? _PyBytes_Resize(&str, cap) < 0 : PyUnicode_Resize(&str, cap) < 0)
                goto done;
            o.p = as_bytes ? PyBytes_AS_STRING(str) : PyUnicode_DATA(str);
            o.cap = cap;
        } else if (!str && reserve(&o, bound) < 0) {
            goto done;
        }
        char *w = o.p + o.len;
        w = put(w, head_text, head_len);
        char *offset_text = w;
        w = put_i64(w, base + pos);
        Py_ssize_t offset_len = w - offset_text;
        LIT(w, ", \"store_size\": ");
        w = put_i64(w, size);
        LIT(w, ", \"magic\": \"MESSAGE_MAGIC_CODE\", \"topic\": \"");
        w = put(w, b + te + 1, tl);
        LIT(w, "\", \"queue_id\": ");
        w = put_i64(w, get32(r + AT_QUEUE_ID));
        LIT(w, ", \"queue_offset\": ");
        w = put_i64(w, get64(r + AT_QUEUE_OFFSET));
        LIT(w, ", \"physical_offset\": ");
        w = phys == base + pos ? put(w, offset_text, offset_len) : put_i64(w, phys);   /* (as a broker writes it) */
        LIT(w, ", \"flag\": ");
        w = put_i64(w, get32(r + AT_FLAG));
        LIT(w, ", ");
        w = put(w, flag_text, flag_len);
        LIT(w, ", \"born_timestamp\": ");
        w = put_i64(w, get64(r + AT_BORN_TIMESTAMP));
        LIT(w, ", \"born_host\": \"");
        w = put_host_cached(w, r + AT_BORN_HOST, &born_host);
        LIT(w, "\", \"store_timestamp\": ");
        w = put_i64(w, get64(r + AT_STORE_TIMESTAMP));
        LIT(w, ", \"store_host\": \"");
        w = put_host_cached(w, r + AT_STORE_HOST, &store_host);
        LIT(w, "\", \"reconsume_times\": ");
        w = put_i64(w, get32(r + AT_RECONSUME_TIMES));
        LIT(w, ", \"prepared_transaction_offset\": ");
        w = put_i64(w, get64(r + AT_PREPARED_OFFSET));
        int32_t crc = get32(r + AT_CRC);
        LIT(w, ", \"body_crc\": ");
        w = put_i64(w, crc);
        if ((int32_t)(crc32_ieee(r + FIXED_SIZE, blen) & 0x7FFFFFFF) == crc)
            LIT(w, ", \"crc_ok\": true, \"stored_body_len\": ");
        else
            LIT(w, ", \"crc_ok\": false, \"stored_body_len\": ");
        char *blen_text = w;
        w = put_i64(w, blen);
        Py_ssize_t blen_len = w - blen_text;
        LIT(w, ", \"body_len\": ");
        w = put(w, blen_text, blen_len);
        LIT(w, ", \"tags\": ");
        if (tags < 0) {
            LIT(w, "null");
        } else {
            *w++ = '"';
            w = put(w, p + val_at[tags], val_len[tags]);
            *w++ = '"';
        }
        LIT(w, ", \"keys\": [");
        if (keys >= 0) {                /* KEYS split on spaces, empty pieces dropped */
            const unsigned char *v = p + val_at[keys];
            Py_ssize_t vl = val_len[keys], s = 0, first = 1;
            while (s < vl) {
                while (s < vl && v[s] == ' ')
                    s++;
                Py_ssize_t e = s;
                while (e < vl && v[e] != ' ')
                    e++;
                if (e > s) {
                    if (!first)
                        LIT(w, ", ");
                    *w++ = '"';
                    w = put(w, v + s, e - s);
                    *w++ = '"';
                    first = 0;
                }
                s = e;
            }
        }
        LIT(w, "], \"uniq_key\": ");
        if (uniq < 0) {
            LIT(w, "null");
        } else {
            *w++ = '"';
            w = put(w, p + val_at[uniq], val_len[uniq]);
            *w++ = '"';
        }
        LIT(w, ", \"msg_id\": \"");
        w = put(w, store_host.hex, 16);           /* (the store host was just written: its hex is this one's) */
        w = put_hex(w, r + AT_PHYSICAL_OFFSET, 8);
        LIT(w, "\", \"properties\": {");
        for (Py_ssize_t j = 0; j < pairs; j++) {
            if (j)
                LIT(w, ", ");
            *w++ = '"';
            w = put(w, p + key_at[j], key_len[j]);
            LIT(w, "\": \"");
            w = put(w, p + val_at[j], val_len[j]);
            *w++ = '"';
        }
        LIT(w, "}, \"body_note\": null, \"body\": null, \"body_truncated\": false, \"body_encoding\": \"none\"}\n");
        o.len = w - o.p;
        pos = rec_end;
    }
    PyObject *text = NULL;
    if (str) {
        if ((as_bytes ? _PyBytes_Resize(&str, o.len) : PyUnicode_Resize(&str, o.len)) == 0) {
            text = str;
            str = NULL;
        }
    } else {
        text = PyUnicode_DecodeUTF8(o.p, o.len, "strict");
    }
    if (text)
        result = Py_BuildValue("NnL", text, k, pos);
done:
    Py_XDECREF(str);
    if (in_kept) {                      /* (it may have grown, and moved) */
        kept.p = o.p;
        kept.cap = o.cap;
    }
    if (kept.cap > (64 << 20)) {        /* (a call of huge records: not kept) */
        PyMem_Free(kept.p);
        kept.p = NULL;
        kept.cap = 0;
    }
    PyBuffer_Release(&buf);
    return result;
}
