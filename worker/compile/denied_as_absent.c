/* Preloaded into nvcc's compile process (worker/compile/absent_reads.py builds it; worker/compile/compile_sandbox.py
 * sets LD_PRELOAD): a read that confinement denies fails as a missing file would.
 *
 * Why: Landlock refuses to open a file outside the compile's folders (EACCES), but a path that does
 * not exist fails before Landlock is asked (ENOENT). The host preprocessor tells the two apart: for
 * `__has_include(</path>)`, assembled by token pasting where the source guard cannot see it, EACCES
 * means "exists" (then "Permission denied"), ENOENT "absent". A job could so learn whether any
 * path on the worker exists. With this, both read as absent. Only reads are changed; writes keep
 * their own errors. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int is_read(int flags) { return (flags & O_ACCMODE) == O_RDONLY && !(flags & O_CREAT); }

static int as_absent(int rc, int flags) {
    if (rc < 0 && errno == EACCES && is_read(flags)) errno = ENOENT;
    return rc;
}

static mode_t mode_of(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define PATH_OPEN(name)                                                          \
    int name(const char *path, int flags, ...) {                                 \
        static int (*real)(const char *, int, ...);                              \
        if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        va_list ap;                                                              \
        va_start(ap, flags);                                                     \
        mode_t mode = mode_of(flags, ap);                                        \
        va_end(ap);                                                              \
        return as_absent(real(path, flags, mode), flags);                        \
    }

#define DIR_OPEN(name)                                                           \
    int name(int dir, const char *path, int flags, ...) {                        \
        static int (*real)(int, const char *, int, ...);                         \
        if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        va_list ap;                                                              \
        va_start(ap, flags);                                                     \
        mode_t mode = mode_of(flags, ap);                                        \
        va_end(ap);                                                              \
        return as_absent(real(dir, path, flags, mode), flags);                   \
    }

PATH_OPEN(open)
PATH_OPEN(open64)
DIR_OPEN(openat)
DIR_OPEN(openat64)

/* The fortified entry points (_FORTIFY_SOURCE builds call these for a flags value not known at
 * compile time). */
int __open_2(const char *path, int flags) { return open(path, flags); }
int __open64_2(const char *path, int flags) { return open64(path, flags); }
int __openat_2(int dir, const char *path, int flags) { return openat(dir, path, flags); }
int __openat64_2(int dir, const char *path, int flags) { return openat64(dir, path, flags); }

#define STREAM_OPEN(name)                                                        \
    FILE *name(const char *path, const char *how) {                              \
        static FILE *(*real)(const char *, const char *);                        \
        if (!real) real = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, #name); \
        FILE *f = real(path, how);                                               \
        if (!f && errno == EACCES && how[0] == 'r' && !strchr(how, '+')) errno = ENOENT; \
        return f;                                                                \
    }

STREAM_OPEN(fopen)
STREAM_OPEN(fopen64)
