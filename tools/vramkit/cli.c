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
