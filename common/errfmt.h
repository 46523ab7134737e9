/*
 * The one way to hand an error message to a caller: functions that fail
 * with `char **err` (STYLE.md, Errors) format it here. The message is
 * malloc'd (the caller frees it); out of memory aborts, h2o's policy.
 */
#ifndef GW_COMMON_ERRFMT_H
#define GW_COMMON_ERRFMT_H

#include <stdarg.h>

/* Sets *err to the formatted message and returns -1, so that a failing
 * function can end with `return gw_errorf(err, ...)`. */
int gw_errorf(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* gw_errorf with a va_list (for helpers that add a prefix of their own). */
int gw_verrorf(char **err, const char *fmt, va_list args) __attribute__((format(printf, 2, 0)));

/* The formatted string, malloc'd at its exact length (the caller frees it);
 * for messages built before they are handed on. Never NULL. */
char *gw_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
