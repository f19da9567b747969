/* LD_PRELOAD library for the broker's I/O error test: segment files (and the committed
 * offsets log) that fail like a dying disk, on demand.
 *
 * While the file named by $IO_ERROR_TRIGGER exists, for file descriptors of segment files
 * (".log" under a "topics" directory) and of consumer_offsets.log:
 *   trigger content "write": writev() and write() write the first half of their bytes,
 *                            then fail with EIO (a torn write);
 *   trigger content "sync":  fsync() and fdatasync() fail with EIO, syncing nothing.
 * Everything else, and everything while the trigger file is absent, passes through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* 'w' or 's' if the trigger asks for that fault now, else 0. */
static char fault_now(void)
{
    const char *trigger = getenv("IO_ERROR_TRIGGER");
    if (trigger == NULL)
        return 0;
    int saved = errno;
    char mode = 0;
    int fd = open(trigger, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[8] = {0};
        if (read(fd, buf, sizeof buf - 1) > 0)
            mode = buf[0] == 'w' ? 'w' : buf[0] == 's' ? 's' : 0;
        close(fd);
    }
    errno = saved;
    return mode;
}

static int is_segment(int fd)
{
    char proc[64], path[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, path, sizeof path - 1);
    if (n < 4)
        return 0;
    path[n] = '\0';
    /* a segment (DATA_DIR/topics/...) or the offsets log, never the broker's own log */
    return strcmp(path + n - 4, ".log") == 0
           && (strstr(path, "/topics/") != NULL
               || strstr(path, "/consumer_offsets.log") != NULL);
}

static ssize_t real_write(int fd, const void *buf, size_t count)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL)
        real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    return real(fd, buf, count);
}

ssize_t write(int fd, const void *buf, size_t count)
{
    if (fault_now() != 'w' || !is_segment(fd))
        return real_write(fd, buf, count);
    real_write(fd, buf, count / 2);
    errno = EIO;
    return -1;
}

ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
    static ssize_t (*real)(int, const struct iovec *, int);
    if (real == NULL)
        real = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    if (fault_now() != 'w' || !is_segment(fd))
        return real(fd, iov, iovcnt);
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++)
        total += iov[i].iov_len;
    size_t left = total / 2;
    for (int i = 0; i < iovcnt && left > 0; i++) {
        size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;
        if (real_write(fd, iov[i].iov_base, n) != (ssize_t)n)
            break;
        left -= n;
    }
    errno = EIO;
    return -1;
}

static int failing_sync(int fd, const char *name)
{
    int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, name);
    if (fault_now() == 's' && is_segment(fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd);
}

int fsync(int fd)
{
    return failing_sync(fd, "fsync");
}

int fdatasync(int fd)
{
    return failing_sync(fd, "fdatasync");
}
