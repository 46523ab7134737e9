/*
 * Unit tests for common/cpus.c: the cgroup CPU quota read from fake cgroup
 * trees (v2 cpu.max, v1 cpu.cfs_quota_us/cpu.cfs_period_us, hybrid hosts,
 * a limit on an ancestor, the host path a container without a cgroup
 * namespace sees), rounded up, and the usable count that it bounds.
 * `workers: 0` once meant the node's CPUs whatever the container's limit.
 */
#define _GNU_SOURCE /* mkdtemp, sched_getaffinity */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/cpus.h"

static char root[64];

/* writes root/rel (making its directories) with `text` */
static void put(const char *rel, const char *text)
{
    char path[512], cmd[600];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", root, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_ptr_nonnull(fp = fopen(path, "w"));
    fputs(text, fp);
    fclose(fp);
}

static void setup(void)
{
    snprintf(root, sizeof(root), "/tmp/gw-test-cpus-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ck_assert_int_eq(system(cmd), 0);
}

static unsigned affinity(void)
{
    cpu_set_t set;

    ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    return (unsigned)CPU_COUNT(&set);
}

START_TEST(v2_quota_rounds_up)
{
    char file[GW_CPUS_SOURCE_MAX] = "";

    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "150000 100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, file, sizeof(file)), 2);
    ck_assert_msg(strstr(file, "/sys/fs/cgroup/cpu.max 150000 100000") != NULL, "%s", file);
}
END_TEST

START_TEST(v2_max_is_no_quota)
{
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
}
END_TEST

START_TEST(v2_small_quota_is_one_cpu)
{
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "10000 100000\n"); /* 0.1 CPU */
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 1);
}
END_TEST

START_TEST(v2_the_smallest_quota_up_the_tree)
{
    /* a Kubernetes pod: the pod's cgroup limits 3 CPUs, the container's own 1.5, the slice none */
    put("proc/self/cgroup", "0::/kubepods.slice/pod1/cri-c1\n");
    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/kubepods.slice/cpu.max", "max 100000\n");
    put("sys/fs/cgroup/kubepods.slice/pod1/cpu.max", "300000 100000\n");
    put("sys/fs/cgroup/kubepods.slice/pod1/cri-c1/cpu.max", "150000 100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 2);
    put("sys/fs/cgroup/kubepods.slice/pod1/cri-c1/cpu.max", "max 100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 3); /* the limit is on the parent */
}
END_TEST

START_TEST(v1_quota_over_period)
{
    char file[GW_CPUS_SOURCE_MAX] = "";

    put("proc/self/cgroup", "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n");
    put("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
    put("sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, file, sizeof(file)), 3);
    ck_assert_msg(strstr(file, "cpu.cfs_quota_us 250000, cpu.cfs_period_us 100000") != NULL, "%s", file);
}
END_TEST

START_TEST(v1_minus_one_is_no_quota)
{
    put("proc/self/cgroup", "1:cpu:/\n0::/\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
}
END_TEST

START_TEST(v1_host_path_without_cgroup_namespace)
{
    /* docker/podman on cgroup v1: /proc/self/cgroup names the host's path, the container
     * has its own cgroup mounted at the controller's root */
    put("proc/self/cgroup", "1:cpu:/libpod_parent/libpod-0123\n0::/\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "100000\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 1);
}
END_TEST

START_TEST(hybrid_host_reads_v1_cpu)
{
    /* v2 mounted at unified/ holds no cpu controller; v1's cpu has the quota */
    put("proc/self/cgroup", "9:name=systemd:/\n1:cpu:/\n0::/\n");
    put("sys/fs/cgroup/unified/cgroup.controllers", "\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000\n");
    put("sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 2);
}
END_TEST

START_TEST(no_cgroup_files_no_quota)
{
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
    put("proc/self/cgroup", "garbage\n0::relative\n::\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "lots 100000\n");
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
    put("sys/fs/cgroup/cpu.max", "100000\n"); /* no period */
    ck_assert_uint_eq(gw_cpus_quota(root, NULL, 0), 0);
}
END_TEST

START_TEST(usable_is_the_quota_below_the_affinity)
{
    char source[GW_CPUS_SOURCE_MAX];

    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/cpu.max", "50000 100000\n");
    ck_assert_uint_eq(gw_cpus_usable(root, source, sizeof(source)), 1);
    ck_assert_msg(strncmp(source, "cgroup CPU quota", 16) == 0 || affinity() == 1, "%s", source);

    put("sys/fs/cgroup/cpu.max", "max 100000\n");
    ck_assert_uint_eq(gw_cpus_usable(root, source, sizeof(source)), affinity());
    ck_assert_str_eq(source, "affinity mask, no cgroup CPU quota");

    put("sys/fs/cgroup/cpu.max", "100000000 100000\n"); /* 1000 CPUs: the mask is smaller */
    ck_assert_uint_eq(gw_cpus_usable(root, source, sizeof(source)), affinity());
    ck_assert_msg(strncmp(source, "affinity mask (cgroup CPU quota 1000", 36) == 0, "%s", source);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpus");
    TCase *tc = tcase_create("quota");
    SRunner *sr;
    int failed;

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, v2_quota_rounds_up);
    tcase_add_test(tc, v2_max_is_no_quota);
    tcase_add_test(tc, v2_small_quota_is_one_cpu);
    tcase_add_test(tc, v2_the_smallest_quota_up_the_tree);
    tcase_add_test(tc, v1_quota_over_period);
    tcase_add_test(tc, v1_minus_one_is_no_quota);
    tcase_add_test(tc, v1_host_path_without_cgroup_namespace);
    tcase_add_test(tc, hybrid_host_reads_v1_cpu);
    tcase_add_test(tc, no_cgroup_files_no_quota);
    tcase_add_test(tc, usable_is_the_quota_below_the_affinity);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
