/* src/engine/cpu/team.h - a team of threads that runs one function over
 * parts of a job: the cpu executor's intra-op threads. The caller's thread
 * is part 0; the others are started once, when the team is made, and wait
 * between jobs, so a run starts no thread and allocates nothing. */
#ifndef VRAM_ENGINE_CPU_TEAM_H
#define VRAM_ENGINE_CPU_TEAM_H

typedef struct vram__team vram__team;

/* fn(arg, part, parts) for every part < parts, each on its own thread. */
typedef void (*vram__team_fn)(void *arg, int part, int parts);

/* A team of `threads` (>= 2; the caller's counted). 0, VRAM_EHOSTMEM, or
 * VRAM_EINTERNAL naming pthread's error; nothing is left running then. */
int vram__team_create(int threads, vram__team **out);
/* Stops and joins the threads. NULL is accepted. */
void vram__team_destroy(vram__team *t);
/* Runs fn over every part and returns when all are done. One job at a
 * time: the team belongs to one context, which runs on one thread. */
void vram__team_run(vram__team *t, vram__team_fn fn, void *arg);
int vram__team_size(const vram__team *t);

#endif
