/* tools/vramkit/cli.c - argument helpers and error printing for the CLI. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "vramkit.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vramkit %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (vramkit %s --help)\n", cmd);
    return 2;
}

int cli_lib_error(const char *cmd, int rc)
{
    const char *msg = vram_last_error();
    fprintf(stderr, "vramkit %s: %s\n", cmd, *msg ? msg : vram_strerror(rc));
    return 1;
}

int cli_watch_configured(vram_pool *pool)
{
    const char *dir = vram_config_get()->oom_dir;
    if (!dir || !*dir)
        return 0;
    vram_oom_opts oo;
    vram_oom_opts_init(&oo); /* a malformed variable keeps its default */
    oo.directory = dir;
    return vram_pool_oom_watch(pool, &oo);
}

int cli_backend_is_gpu(const char *name)
{
    for (int t = 0; name && t < VRAM_BACKEND_TYPE_COUNT; t++)
        if (!strcmp(name, vram_backend_type_name((vram_backend_type)t)))
            return vram_backend_type_is_gpu((vram_backend_type)t);
    return 0;
}

int cli_is(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i, const char *name)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (arg[n] == '=')
        return arg + n + 1;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "%s needs a value", name);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}
