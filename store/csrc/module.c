/* The store's compiled kernel: the loops of puts, their dispatch, index writing and `store stats`,
 * byte for byte what the pure-Python paths write (store/kernel.py says which is used; the tests compare both).
 *
 *   put_one      one message put: checked, placed, written into the map and queued for dispatch
 *   put_quick    put_one at the commit log's write position under the put lock (a put no one waits for)
 *   put_run_quick  the same for a producer's batch made into a run (frame_write under the put lock)
 *   run_prepare  a batch's messages as one run: shared fields checked, sizes and body CRCs
 *   run_write    the placed run copied into the mapped file
 *   msg_ids      the run's message ids: the store host prefix + each record's offset in hex
 *   run_units    a placed run's consume queue units and index keys (the dispatch)
 *   pending_units  the same for single puts' pending records, grouped by queue
 *   queue_totals `store stats`: per (topic, queue) totals of a chunk of records
 *   parse_properties  a record's properties string as a dict (every put and read decodes them)
 *   broker_properties  a send's properties as the broker stores them (WAIT=true dropped, CLUSTER set)
 *   index_put    IndexFile.putKey for many keys in order, into a mapped index file
 *   pull_body    a pull's records joined from a consume queue run and a commit log file
 *   batch_entries  a producer's batch body read into its entries, properties merged and parsed
 *   batch_run    the same body read straight into a run (run_prepare's answer, without the messages)
 *   batch_spans  ... or, for ASCII properties, as spans of the frame (no Python object per message),
 *   frame_write  written and
 *   frame_units  dispatched from the frame's bytes
 *   populate     a mapped file's pages made present ahead of the appends (the GIL released)
 *   dump_lines   `store dump --json --body none` lines of plain records, straight from the commit log's bytes
 *
 * One module, mqtool_store._kernel, from this folder's files (setup.py lists them).
 * Layouts: spec/commitlog.md (a V1 record with IPv4 hosts: an 88-byte fixed part), spec/index.md.
 */
#include "kernel.h"

static const char *SHARED[] = {"topic", "queue_id", "sys_flag", "born_host", "born_timestamp",
                               "reconsume_times", "prepared_transaction_offset"};
PyObject *shared_names[N_SHARED];
PyObject *s_body, *s_text, *s_flag, *s_props, *s_tags, *s_keys, *s_uniq_key, *s_space, *s_wait, *s_cluster;

static PyMethodDef methods[] = {
    {"put_one", (PyCFunction)(void (*)(void))put_one, METH_FASTCALL, "One message put into the map: (size, queue offset) or None."},
    {"put_quick", (PyCFunction)(void (*)(void))put_quick, METH_FASTCALL, "put_one at the write position, under the put lock: (msg id, size, queue offset, dispatch) or None."},
    {"put_run_quick", (PyCFunction)(void (*)(void))put_run_quick, METH_FASTCALL, "A FrameRun put at the write position, under the put lock: (msg ids, queue offset, dispatch) or None."},
    {"pending_units", pending_units, METH_VARARGS, "Single puts' consume queue units by queue and their index keys."},
    {"broker_properties", broker_properties, METH_VARARGS, "A send's properties as the broker stores them: (dict, text)."},
    {"parse_properties", parse_properties, METH_O, "A properties string as a dict (string2messageProperties)."},
    {"queue_totals", queue_totals, METH_VARARGS, "Per (topic, queue) totals of a header table's records."},
    {"run_units", run_units, METH_VARARGS, "A placed run's consume queue units and index keys."},
    {"run_prepare", run_prepare, METH_VARARGS, "A batch's messages as a run: (total, sizes, crcs) or None."},
    {"run_write", run_write, METH_VARARGS, "Write a placed run into a writable buffer."},
    {"msg_ids", msg_ids, METH_VARARGS, "The run's message ids."},
    {"index_put", index_put, METH_VARARGS, "IndexFile.putKey for many keys; returns the new hash slots."},
    {"batch_entries", batch_entries, METH_VARARGS, "A batch body's entries: [(flag, body, text, props)] or None."},
    {"batch_run", batch_run, METH_VARARGS, "A batch body as a run: (total, sizes, crcs, props, parts, flags) or None."},
    {"batch_spans", batch_spans, METH_VARARGS, "A batch body as spans of its frame: (total, sizes, crcs, flags, spans, may_wait) or None."},
    {"frame_write", frame_write, METH_VARARGS, "Write a placed batch_spans run into a writable buffer."},
    {"frame_units", frame_units, METH_VARARGS, "A placed batch_spans run's consume queue units and index keys."},
    {"populate", populate, METH_VARARGS, "madvise(MADV_POPULATE_WRITE) over part of a writable map: True, or False if unsupported."},
    {"dump_lines", dump_lines, METH_VARARGS, "store dump --json --body none lines of plain records: (text, or its UTF-8 bytes with as_bytes; records taken; next position)."},
    {"pull_body", pull_body, METH_VARARGS, "A pull's records joined: (body, count, scanned) or None."},
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
        !(s_space = PyUnicode_InternFromString(" ")) || !(s_wait = PyUnicode_InternFromString("WAIT")) ||
        !(s_cluster = PyUnicode_InternFromString("CLUSTER")))
        return NULL;
    if (quick_init() < 0 || quickrun_init() < 0)
        return NULL;
    return PyModule_Create(&module);
}
