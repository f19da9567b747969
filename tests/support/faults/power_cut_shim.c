/* LD_PRELOAD library for the broker's power-loss tests: a record of what a power cut
 * would leave on disk.
 *
 * The real file system keeps everything the broker writes (kill -9 keeps the page cache).
 * This library interposes fsync() and fdatasync() and, each time one succeeds, records
 * what that call made durable, under $POWER_CUT_STORE:
 *   i-KEY   a regular file: its whole content at that moment
 *   d-KEY   a directory: its entries at that moment, one "f KEY NAME" / "d KEY NAME" line
 *           each (other kinds of entry are not recorded)
 *   journal one line per recorded sync: "f|d KEY SIZE PATH" (SIZE: bytes, or entries)
 * KEY is the inode number and birth time (statx), so a reused inode number is a new key.
 *
 * power_cut.py rebuilds a directory tree from these records alone: a name exists only if
 * its directory was fsynced after the name appeared, and a file holds what it held at its
 * last fsync/fdatasync (nothing if never). That is all POSIX promises after a power cut;
 * real file systems often keep more, never less.
 *
 * Any failure to record aborts the process: a gap in the record would make a test pass
 * that should fail.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "power_cut_shim: %s %s: %s\n", what, detail ? detail : "",
            strerror(errno));
    abort();
}

static const char *store(void)
{
    const char *s = getenv("POWER_CUT_STORE");
    if (s == NULL || *s == '\0') {
        errno = EINVAL;
        die("POWER_CUT_STORE", "is not set");
    }
    return s;
}

/* KEY of the object at (dirfd, name); AT_EMPTY_PATH with name "" means dirfd itself.
 * Returns 0, or -1 if the entry vanished meanwhile. */
static int key_of(int dirfd, const char *name, int flags, char *key, size_t n,
                  mode_t *mode, unsigned long long *size)
{
    struct statx st;
    if (statx(dirfd, name, flags | AT_SYMLINK_NOFOLLOW,
              STATX_INO | STATX_BTIME | STATX_TYPE | STATX_SIZE, &st) != 0) {
        if (errno == ENOENT)
            return -1;
        die("statx", name);
    }
    if (!(st.stx_mask & STATX_BTIME)) {
        errno = ENOTSUP;
        die("statx: no birth time on this file system for", name);
    }
    snprintf(key, n, "%llu-%lld.%09u", (unsigned long long)st.stx_ino,
             (long long)st.stx_btime.tv_sec, st.stx_btime.tv_nsec);
    *mode = st.stx_mode;
    if (size != NULL)
        *size = st.stx_size;
    return 0;
}

static void write_all(int fd, const char *buf, size_t len, const char *what)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write", what);
        }
        buf += w;
        len -= (size_t)w;
    }
}

/* Create STORE/NAME atomically from a temporary file filled by fill(). */
static void publish(const char *name, void (*fill)(int out, int src), int src)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d", store(), (int)getpid());
    snprintf(dst, sizeof dst, "%s/%s", store(), name);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0)
        die("open", tmp);
    fill(out, src);
    if (close(out) != 0)
        die("close", tmp);
    if (rename(tmp, dst) != 0)
        die("rename", dst);
}

static void copy_content(int out, int fd)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int in = open(proc, O_RDONLY | O_CLOEXEC); /* the synced fd may be write-only */
    if (in < 0)
        die("open", proc);
    char buf[1 << 16];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("read", proc);
        }
        if (r == 0)
            break;
        write_all(out, buf, (size_t)r, "file record");
    }
    close(in);
}

static unsigned long long listed;

static void copy_entries(int out, int fd)
{
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        die("openat", ".");
    DIR *dir = fdopendir(dfd);
    if (dir == NULL)
        die("fdopendir", "");
    listed = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char key[96], line[PATH_MAX + 128];
        mode_t mode;
        if (key_of(dirfd(dir), e->d_name, 0, key, sizeof key, &mode, NULL) != 0)
            continue;
        if (!S_ISDIR(mode) && !S_ISREG(mode))
            continue;
        int n = snprintf(line, sizeof line, "%c %s %s\n", S_ISDIR(mode) ? 'd' : 'f', key,
                         e->d_name);
        write_all(out, line, (size_t)n, "directory record");
        listed++;
    }
    closedir(dir);
}

static void record(int fd)
{
    char key[96], name[128], proc[64], path[PATH_MAX], line[PATH_MAX + 160];
    mode_t mode;
    unsigned long long size;
    if (key_of(fd, "", AT_EMPTY_PATH, key, sizeof key, &mode, &size) != 0)
        return;
    if (!S_ISDIR(mode) && !S_ISREG(mode))
        return;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(proc, path, sizeof path - 1);
    if (len < 0)
        die("readlink", proc);
    path[len] = '\0';
    pthread_mutex_lock(&lock);
    if (S_ISDIR(mode)) {
        snprintf(name, sizeof name, "d-%s", key);
        publish(name, copy_entries, fd);
        size = listed;
    } else {
        snprintf(name, sizeof name, "i-%s", key);
        publish(name, copy_content, fd);
    }
    char journal[PATH_MAX];
    snprintf(journal, sizeof journal, "%s/journal", store());
    int j = open(journal, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (j < 0)
        die("open", journal);
    int n = snprintf(line, sizeof line, "%c %s %llu %s\n", S_ISDIR(mode) ? 'd' : 'f', key,
                     size, path);
    write_all(j, line, (size_t)n, "journal");
    close(j);
    pthread_mutex_unlock(&lock);
}

int fsync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    int r = real(fd);
    if (r == 0) {
        int saved = errno;
        record(fd);
        errno = saved;
    }
    return r;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    int r = real(fd);
    if (r == 0) {
        int saved = errno;
        record(fd);
        errno = saved;
    }
    return r;
}
