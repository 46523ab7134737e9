/*
 * The CPUs this process may use: the affinity mask bounded by the cgroup
 * CPU quota (what `docker run --cpus`, `podman run --cpus` and a Kubernetes
 * CPU limit set). Read once at start; small files, bounded reads.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/cpus.h"

/* /proc/self/cgroup of a process in many v1 hierarchies, and each quota file, fit well within */
#define CPUS_FILE_MAX 8192
#define CPUS_PATH_MAX 4096

/* Reads `path` whole into buf (NUL-terminated); returns its length, -1 when it cannot be read or is too long. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    size_t len = 0;
    ssize_t n;
    int fd;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    while (len + 1 < size && ((n = read(fd, buf + len, size - 1 - len)) > 0 || (n == -1 && errno == EINTR)))
        if (n > 0)
            len += (size_t)n;
    close(fd);
    if (len + 1 >= size)
        return -1;
    buf[len] = '\0';
    return (ssize_t)len;
}

/* A decimal integer at *p, skipping blanks before it; advances *p. */
static int parse_int(const char **p, long long *out)
{
    char *end;

    while (**p == ' ' || **p == '\t')
        ++*p;
    errno = 0;
    *out = strtoll(*p, &end, 10);
    if (end == *p || errno != 0)
        return -1;
    *p = end;
    return 0;
}

/* The quota in CPUs (rounded up, at least 1) set in the cgroup directory `dir`, 0 when none is; `file` says
 * which file and values, its path without the first `skip` bytes of `dir` (the test root). */
static unsigned quota_in(const char *dir, size_t skip, int v2, char *file, size_t len)
{
    char path[CPUS_PATH_MAX], buf[128], pbuf[128];
    long long quota, period;
    const char *p;

    if (v2) {
        /* cpu.max: "$MAX $PERIOD", $MAX "max" when unlimited */
        if ((size_t)snprintf(path, sizeof(path), "%s/cpu.max", dir) >= sizeof(path) || read_small(path, buf, sizeof(buf)) < 0)
            return 0;
        p = buf;
        if (strncmp(p, "max", 3) == 0 || parse_int(&p, &quota) != 0 || parse_int(&p, &period) != 0)
            return 0;
        if (file != NULL)
            snprintf(file, len, "%.100s %lld %lld", path + skip, quota, period);
    } else {
        char ppath[CPUS_PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir) >= sizeof(path) ||
            (size_t)snprintf(ppath, sizeof(ppath), "%s/cpu.cfs_period_us", dir) >= sizeof(ppath) ||
            read_small(path, buf, sizeof(buf)) < 0 || read_small(ppath, pbuf, sizeof(pbuf)) < 0)
            return 0;
        p = buf;
        if (parse_int(&p, &quota) != 0)
            return 0;
        p = pbuf;
        if (parse_int(&p, &period) != 0)
            return 0;
        if (file != NULL)
            snprintf(file, len, "%.100s %lld, cpu.cfs_period_us %lld", path + skip, quota, period);
    }
    if (quota <= 0 || period <= 0) /* v1 says -1 for no quota */
        return 0;
    long long cpus = (quota + period - 1) / period;
    return cpus < 1 ? 1 : cpus > UINT32_MAX ? UINT32_MAX : (unsigned)cpus;
}

/* The smallest quota set on `cgroup` (a path such as "/kubepods/pod1/c1") or any ancestor under the mount `mnt`. */
static unsigned quota_up(const char *mnt, size_t skip, const char *cgroup, int v2, char *file, size_t len, unsigned best)
{
    char path[CPUS_PATH_MAX], found[GW_CPUS_SOURCE_MAX];
    size_t n = strlen(cgroup);

    /* Without a cgroup namespace the path names the host's hierarchy while the container sees its own cgroup
     * mounted at the root: a directory that does not exist is skipped and the walk reaches the root. */
    for (;;) {
        while (n > 1 && cgroup[n - 1] == '/')
            --n;
        if ((size_t)snprintf(path, sizeof(path), "%s%.*s", mnt, (int)(n == 1 ? 0 : n), cgroup) < sizeof(path)) {
            unsigned q = quota_in(path, skip, v2, found, sizeof(found));
            if (q != 0 && (best == 0 || q < best)) {
                best = q;
                if (file != NULL)
                    snprintf(file, len, "%s", found);
            }
        }
        if (n <= 1)
            break;
        while (n > 1 && cgroup[n - 1] != '/')
            --n;
    }
    return best;
}

unsigned gw_cpus_quota(const char *root, char *file, size_t len)
{
    char buf[CPUS_FILE_MAX], path[CPUS_PATH_MAX];
    unsigned best = 0;
    char *line, *next;

    if (root == NULL)
        root = "";
    if ((size_t)snprintf(path, sizeof(path), "%s/proc/self/cgroup", root) >= sizeof(path) || read_small(path, buf, sizeof(buf)) < 0)
        return 0;
    /* each line: "hierarchy-ID:controller-list:cgroup-path"; v2's is "0::/path" */
    for (line = buf; *line != '\0'; line = next) {
        char *nl = strchr(line, '\n'), *c1, *c2;
        next = nl != NULL ? nl + 1 : line + strlen(line);
        if (nl != NULL)
            *nl = '\0';
        if ((c1 = strchr(line, ':')) == NULL || (c2 = strchr(c1 + 1, ':')) == NULL || c2[1] != '/')
            continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *cgroup = c2 + 1;
        if (controllers[0] == '\0') {
            static const char *v2_mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
            for (size_t i = 0; i != sizeof(v2_mounts) / sizeof(v2_mounts[0]); ++i) {
                char mnt[CPUS_PATH_MAX];
                if ((size_t)snprintf(mnt, sizeof(mnt), "%s%s", root, v2_mounts[i]) < sizeof(mnt))
                    best = quota_up(mnt, strlen(root), cgroup, 1, file, len, best);
            }
            continue;
        }
        /* v1: the hierarchy whose controller list holds "cpu" */
        int has_cpu = 0;
        for (const char *p = controllers; *p != '\0';) {
            size_t n = strcspn(p, ",");
            has_cpu |= n == 3 && memcmp(p, "cpu", 3) == 0;
            p += n + (p[n] == ',');
        }
        if (has_cpu) {
            static const char *v1_mounts[] = {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"};
            for (size_t i = 0; i != sizeof(v1_mounts) / sizeof(v1_mounts[0]); ++i) {
                char mnt[CPUS_PATH_MAX];
                if ((size_t)snprintf(mnt, sizeof(mnt), "%s%s", root, v1_mounts[i]) < sizeof(mnt))
                    best = quota_up(mnt, strlen(root), cgroup, 0, file, len, best);
            }
        }
    }
    return best;
}

unsigned gw_cpus_usable(const char *root, char *source, size_t len)
{
    char quota_file[GW_CPUS_SOURCE_MAX] = "";
    unsigned cpus = 0, quota;
    const char *from = "affinity mask";
    cpu_set_t set;

    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        cpus = (unsigned)CPU_COUNT(&set);
    if (cpus == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = n > 0 ? (unsigned)n : 1;
        from = "online CPUs";
    }
    quota = gw_cpus_quota(root, quota_file, sizeof(quota_file));
    if (source != NULL) {
        if (quota != 0 && quota < cpus)
            snprintf(source, len, "cgroup CPU quota (%.100s), %s %u", quota_file, from, cpus);
        else if (quota != 0)
            snprintf(source, len, "%s (cgroup CPU quota %u: %.100s)", from, quota, quota_file);
        else
            snprintf(source, len, "%s, no cgroup CPU quota", from);
    }
    return quota != 0 && quota < cpus ? quota : cpus;
}
