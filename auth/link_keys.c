/*
 * The live share-link keys: a gw_live_keys_t of gw_link_key_t, read under
 * its read lock for one HMAC and swapped whole on reload (the lifetime rule
 * is at the lock, auth/live_keys.h).
 */
#include <stdlib.h>
#include <string.h>
#include <h2o/memory.h>
#include "auth/link_keys.h"
#include "auth/live_keys.h"

struct st_gw_link_keys_t {
    gw_live_keys_t live; /* of gw_link_key_t */
};

static void free_keys(void *list, size_t num)
{
    gw_share_link_keys_free(list, num);
}

static int load_keys(const char *file, void **list, size_t *num, char **err)
{
    gw_link_key_t *keys;

    if (gw_share_link_keys_load(NULL, file, &keys, num, err) != 0)
        return -1;
    *list = keys;
    return 0;
}

gw_link_keys_t *gw_link_keys_new(const char *env_name, const char *path, char **err)
{
    gw_link_keys_t *set = h2o_mem_alloc(sizeof(*set));
    gw_link_key_t *keys = NULL;
    size_t num_keys = 0;

    *err = NULL;
    if ((env_name != NULL || path != NULL) &&
        gw_share_link_keys_load(env_name, env_name == NULL ? path : NULL, &keys, &num_keys, err) != 0) {
        free(set);
        return NULL;
    }
    gw_live_keys_init(&set->live, env_name == NULL ? path : NULL, keys, num_keys, free_keys);
    return set;
}

void gw_link_keys_free(gw_link_keys_t *set)
{
    if (set == NULL)
        return;
    gw_live_keys_dispose(&set->live);
    free(set);
}

size_t gw_link_keys_count(gw_link_keys_t *set)
{
    return gw_live_keys_count(&set->live);
}

const char *gw_link_keys_file(gw_link_keys_t *set)
{
    return gw_live_keys_file(&set->live);
}

gw_link_result_t gw_link_keys_verify(gw_link_keys_t *set, h2o_iovec_t token, const char *sandbox_id, uint16_t port,
                                     const uint64_t *current_epoch, uint64_t now, uint64_t max_ttl_s, gw_share_link_t *out)
{
    size_t num;
    const gw_link_key_t *keys = gw_live_keys_read_begin(&set->live, &num);
    gw_link_result_t result = gw_share_link_verify(token, keys, num, sandbox_id, port, current_epoch, now, max_ttl_s, out);

    gw_live_keys_read_end(&set->live);
    return result;
}

int gw_link_keys_reload(gw_link_keys_t *set, char **err)
{
    return gw_live_keys_reload(&set->live, load_keys, err);
}
