/*
 * The number of CPUs this process may use: its affinity mask, bounded by
 * the CPU quota of its cgroup (v2 cpu.max, v1 cpu.cfs_quota_us over
 * cpu.cfs_period_us) rounded up, as a container runtime's --cpus or a
 * Kubernetes CPU limit sets it. What `workers: 0` resolves to.
 */
#ifndef GW_COMMON_CPUS_H
#define GW_COMMON_CPUS_H

#include <stddef.h>

/* bound of the text gw_cpus_usable writes */
#define GW_CPUS_SOURCE_MAX 160

/* The CPU quota of the cgroup this process is in, read under `root` ("" or
 * NULL: the real /, a test passes a directory of fake files):
 * root/proc/self/cgroup names the cgroup; its quota file and every
 * ancestor's are read under the v2 mount (root/sys/fs/cgroup, or its
 * unified/ of a hybrid host) and the v1 cpu controller's
 * (root/sys/fs/cgroup/cpu,cpuacct or cpu). Returns the smallest quota in
 * CPUs, rounded up and at least 1, or 0 when no cgroup sets one; when not
 * 0 and `file` is not NULL, writes the file and its value it came from
 * (at most `len` bytes, NUL-terminated). */
unsigned gw_cpus_quota(const char *root, char *file, size_t len);

/* The CPUs this process may use: the count of its sched_getaffinity mask
 * (sysconf's online CPUs if that fails), lowered to the cgroup quota
 * (gw_cpus_quota under root), at least 1. When `source` is not NULL writes
 * where the number came from, e.g. "cgroup quota /sys/fs/cgroup/cpu.max
 * 150000 100000; affinity 4" (at most `len` bytes). */
unsigned gw_cpus_usable(const char *root, char *source, size_t len);

#endif
