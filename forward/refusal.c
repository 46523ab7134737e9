/*
 * Why the gateway refused a tunnel, in one line for the user of
 * tcp-forward: the status and code of the gateway's JSON error
 * (errors/errors.c, CONTRACT.md "Errors"), and what to do here, in terms of
 * this command's flags rather than a browser's preview link.
 */
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "forward/wss_handshake.h"

typedef struct st_refusal_t {
    const char *code, *message, *sandbox;
    int port;
} refusal_t;

/* Our sentence for the codes a tunnel meets; NULL: the gateway's message says it best. */
static int explain_code(const gw_forward_conf_t *conf, const refusal_t *r, char *out, size_t size)
{
    const char *sb = r->sandbox != NULL ? r->sandbox : "?";
    const char *env = conf->token_env != NULL ? conf->token_env : "";

    if (strcmp(r->code, "missing_token") == 0 && conf->token == NULL)
        return snprintf(out, size,
                        "port %d of sandbox %s is private and no token was sent: put the sandbox's access token in an "
                        "environment variable and pass --token-env VARIABLE",
                        r->port, sb);
    if (strcmp(r->code, "invalid_token") == 0)
        return snprintf(out, size,
                        "the token in $%s is not the access token of sandbox %s (a new one was issued, or the wrong "
                        "sandbox)",
                        env, sb);
    if (strcmp(r->code, "sandbox_not_found") == 0)
        return snprintf(out, size, "sandbox %s does not exist: check the --url", sb);
    if (strcmp(r->code, "port_not_exposed") == 0)
        return snprintf(out, size, "port %d of sandbox %s is not exposed: expose it (as a tcp port) first", r->port, sb);
    if (strcmp(r->code, "port_not_open") == 0)
        return snprintf(out, size, "nothing is listening on port %d in sandbox %s: start the server there (listening on 0.0.0.0)",
                        r->port, sb);
    if (strcmp(r->code, "upstream_timeout") == 0)
        return snprintf(out, size, "port %d of sandbox %s did not accept the connection in time", r->port, sb);
    return -1;
}

/* The body's error object, if the body is the gateway's JSON error; 0 or -1. */
static int parse_body(const char *body, size_t len, json_t **root, refusal_t *r)
{
    json_t *err, *port;

    if (body == NULL || (*root = json_loadb(body, len, 0, NULL)) == NULL)
        return -1;
    if (!json_is_object(err = json_object_get(*root, "error")) || !json_is_string(json_object_get(err, "code")))
        return -1;
    r->code = json_string_value(json_object_get(err, "code"));
    r->message = json_string_value(json_object_get(err, "message"));
    r->sandbox = json_string_value(json_object_get(err, "sandboxId"));
    port = json_object_get(err, "port");
    r->port = json_is_integer(port) ? (int)json_integer_value(port) : 0;
    return 0;
}

void gw_wss_explain_refusal(const gw_forward_conf_t *conf, int status, const char *body, size_t len, char *why, size_t whylen)
{
    json_t *root = NULL;
    refusal_t r = {NULL};
    char own[512];

    if (parse_body(body, len, &root, &r) != 0) {
        snprintf(why, whylen,
                 "the gateway answered %d instead of opening the tunnel, without a lizard error: is --url the "
                 "wss://<port>-<sandbox>.<domain>/.lizard/tcp of a lizard gateway?",
                 status);
    } else if (explain_code(conf, &r, own, sizeof(own)) >= 0) {
        snprintf(why, whylen, "the gateway refused the tunnel: %d %s: %s", status, r.code, own);
    } else {
        snprintf(why, whylen, "the gateway refused the tunnel: %d %s: %s", status, r.code,
                 r.message != NULL ? r.message : "(no message)");
    }
    json_decref(root);
}
