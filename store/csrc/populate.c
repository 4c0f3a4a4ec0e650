/* Pages of a mapped file made present ahead of the appends (store/mappedfile.py MappedFile.prewrite). */
#include "kernel.h"
#include <errno.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23      /* Linux 5.14 */
#endif

/* populate(map, lo, hi) -> bool
 * madvise(MADV_POPULATE_WRITE) over [lo, hi) of a writable mmap (lo page-aligned), with the GIL
 * released: the pages are faulted in writable, as the first appends would fault them, without
 * changing a byte. False where the kernel has no MADV_POPULATE_WRITE (the caller writes zeros
 * instead); an error where madvise fails otherwise. The map's address is read, then its buffer
 * released before the call: a map closed meanwhile makes madvise fail (ENOMEM), which is
 * answered True (nothing left to do). */
PyObject *populate(PyObject *self, PyObject *args)
{
    PyObject *map;
    Py_ssize_t lo, hi;
    if (!PyArg_ParseTuple(args, "Onn", &map, &lo, &hi))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(map, &buf, PyBUF_WRITABLE) < 0)
        return NULL;
    char *base = buf.buf;
    Py_ssize_t len = buf.len;
    PyBuffer_Release(&buf);
    long page = sysconf(_SC_PAGESIZE);
    if (lo < 0 || hi > len || lo > hi || (page > 0 && ((uintptr_t)(base + lo)) % page)) {
        PyErr_SetString(PyExc_ValueError, "populate: the range must be page-aligned and inside the map");
        return NULL;
    }
    if (lo == hi)
        Py_RETURN_TRUE;
    int rc, err;
    Py_BEGIN_ALLOW_THREADS
    rc = madvise(base + lo, hi - lo, MADV_POPULATE_WRITE);
    err = errno;
    Py_END_ALLOW_THREADS
    if (rc == 0 || err == ENOMEM)
        Py_RETURN_TRUE;
    if (err == EINVAL)
        Py_RETURN_FALSE;
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}
