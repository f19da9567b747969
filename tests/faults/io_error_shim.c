/* LD_PRELOAD library for the broker's I/O error test: segment files that fail like a
 * dying disk, on demand.
 *
 * While the file named by $IO_ERROR_TRIGGER exists, for file descriptors whose path ends
 * in ".log" (segment files):
 *   trigger content "write": writev() writes the first half of its bytes, then fails with
 *                            EIO (a torn write);
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
    return strcmp(path + n - 4, ".log") == 0;
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
        if (write(fd, iov[i].iov_base, n) != (ssize_t)n)
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
