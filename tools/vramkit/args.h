/* tools/vramkit/args.h - the command line's options, declared once per
 * command as a table: the table parses argv (--name VALUE and --name=VALUE,
 * positional arguments anywhere, "--" ending the options), checks each
 * value against its kind and range, and prints the command's help; so every
 * command and subcommand takes -h/--help, names the flag in every error,
 * and suggests the flag (or the value) a misspelt one was probably meant to
 * be. Usage errors print one line on stderr and make the exit status 2. */
#ifndef VRAMKIT_ARGS_H
#define VRAMKIT_ARGS_H

#include <stdint.h>

/* What an option's value is, and where it goes. */
typedef enum cli_kind {
    CLI_FLAG,   /* no value; int *dest = 1 */
    CLI_STRING, /* const char **dest */
    CLI_LIST,   /* repeatable; cli_list *dest collects every value */
    CLI_CHOICE, /* const char **dest: one of `choices` ("vmm|segments") */
    CLI_SIZE,   /* uint64_t *dest: a size (4096, 2M, 1.5G) within [lo, hi] */
    CLI_POW2,   /* uint64_t *dest: a size that is a power of two, at least lo */
    CLI_UINT,   /* uint64_t *dest: a whole number within [lo, hi] */
    CLI_NUMBER, /* double *dest: a number within [lo, hi] */
} cli_kind;

typedef struct cli_list {
    const char **items; /* argv's strings; the array is the caller's to free */
    int n;
} cli_list;

typedef struct cli_opt {
    const char *name;    /* "--capacity"; NULL ends a table */
    const char *alias;   /* a short form ("-o"), or NULL */
    cli_kind kind;
    void *dest;
    const char *value;   /* how the help names the value ("BYTES"); NULL for flags */
    const char *help;    /* one line */
    double lo, hi;       /* the range of numbers and sizes (hi 0: none) */
    const char *choices; /* CLI_CHOICE */
    int *given;          /* set to 1 when the option was given (may be NULL) */
} cli_opt;

typedef struct cli_spec {
    const char *cmd;      /* "replay", "model run" */
    const char *synopsis; /* what follows the options in the usage line ("TRACE...") */
    const char *about;    /* what the command does (paragraphs, newline-terminated) */
    const cli_opt *opts;  /* -h/--help is added */
    int min_args, max_args; /* positional arguments (max_args -1: any number) */
    const char *arg_name;   /* how an error names a missing one ("trace") */
} cli_spec;

/* The result of cli_parse for a command to return as is: */
#define CLI_HELP (-1) /* help printed: exit 0 */

/* Parse argv[1..argc-1] against the spec: options into their destinations,
 * positional arguments into *args (a calloc'd array the caller frees, *n
 * of them). Returns 0, CLI_HELP, or 2 after a usage error was printed. */
int cli_parse(const cli_spec *spec, int argc, char **argv, const char ***args, int *n);

/* Print "vramkit CMD: <message> (vramkit CMD --help)" on stderr; returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The closest of `n` words to `word` by edit distance, when close enough
 * to be a likely typo (at most a third of the word, and 2), else NULL. */
const char *cli_closest(const char *word, const char *const *words, int n);

#endif
