/*
 * The token check's own cost, timed: gw_token_matches_digest (what a
 * private port's request runs: SHA-256 of the presented token, compared in
 * constant time with the record's decoded digest) called N times on one
 * thread, as CPU time per call. A benchmark, not a test: it asserts nothing
 * but that the right token matches and a wrong one does not.
 *
 *   meson test -C build --benchmark token_check -v
 *   build/tests/bench_token_check [N] [TOKEN_LENGTH]   N 1000000, length 43
 *
 * The default token is 43 characters, what 32 random bytes are in base64url
 * (gwtest's are 32, from 24 bytes); any length up to 55 is one SHA-256
 * block. Each figure is the best of 5 rounds (other processes only add
 * time), per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <h2o/memory.h>
#include "auth/token.h"

#define ROUNDS 5

static double cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Best of ROUNDS rounds of n calls, ns per call; *matched counts the calls that matched. */
static double time_matches(h2o_iovec_t token, const unsigned char digest[32], long n, long *matched)
{
    double best = 0;
    int round;

    *matched = 0;
    for (round = 0; round != ROUNDS; ++round) {
        double start = cpu_ns(), ns;
        long i, m = 0;
        for (i = 0; i != n; ++i)
            m += gw_token_matches_digest(token, digest);
        ns = (cpu_ns() - start) / (double)n;
        if (round == 0 || ns < best)
            best = ns;
        *matched += m;
    }
    return best;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000, len = argc > 2 ? strtol(argv[2], NULL, 10) : 43, i, matched;
    char token[256], wrong[256];
    unsigned char digest[32];
    double right_ns, wrong_ns;

    if (n <= 0 || len <= 0 || len >= (long)sizeof(token)) {
        fprintf(stderr, "usage: %s [N > 0] [TOKEN_LENGTH 1..255]\n", argv[0]);
        return 2;
    }
    for (i = 0; i != len; ++i)
        token[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[(i * 37 + 11) % 64];
    memcpy(wrong, token, (size_t)len);
    wrong[len - 1] ^= 1;
    gw_token_sha256(token, (size_t)len, digest); /* what the record's token_sha256 decodes to */

    right_ns = time_matches(h2o_iovec_init(token, (size_t)len), digest, n, &matched);
    if (matched != n * ROUNDS) {
        fprintf(stderr, "token_check: the right token did not match\n");
        return 1;
    }
    wrong_ns = time_matches(h2o_iovec_init(wrong, (size_t)len), digest, n, &matched);
    if (matched != 0) {
        fprintf(stderr, "token_check: a wrong token matched\n");
        return 1;
    }
    printf("gw_token_matches_digest, %ld-byte token, best of %d x %ld calls, CPU time per call:\n", len, ROUNDS, n);
    printf("  right token %.1f ns (%.3f us)\n", right_ns, right_ns / 1000);
    printf("  wrong token %.1f ns (%.3f us)\n", wrong_ns, wrong_ns / 1000);
    return 0;
}
