/*
 * The cors_origins:<n> field of a sandbox record (CONTRACT.md, "CORS at the
 * edge"): comma-separated exact origins, or "*". Pure: parsed once per
 * record fetch into the normalized list that requests match against
 * (http/cors.h), byte for byte.
 */
#ifndef GW_ROUTING_CORS_ORIGINS_H
#define GW_ROUTING_CORS_ORIGINS_H

#include <stddef.h>
#include <h2o/memory.h>

/* Parses `len` bytes at `s`. Writes each valid entry to `out` (room for len
 * + 1 bytes: normalizing never lengthens an entry) as its serialized origin
 * followed by ','. An entry is scheme "://" host [":" port], blanks around
 * it ignored: the scheme and host are lowercased, a default port (http 80,
 * https 443) dropped, as a browser serializes its Origin. "*" sets *any.
 * Entries that are not origins ("null", a path, a trailing '/', userinfo,
 * an empty entry between two commas is just skipped) are ignored; the first
 * one is returned in *first_bad ({NULL, 0}: none; points into s). Returns
 * the bytes written to out. */
size_t gw_cors_origins_parse(const char *s, size_t len, char *out, int *any, h2o_iovec_t *first_bad);

/* 1 when `origin` (a request's Origin header, as sent) is one of the
 * entries of `list` (as gw_cors_origins_parse wrote it). "null" never is. */
int gw_cors_origins_contain(h2o_iovec_t list, h2o_iovec_t origin);

#endif
