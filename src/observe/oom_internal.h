/* src/observe/oom_internal.h - what the files of the OOM report share: the
 * figures the diagnosis reads (oom_diagnose.c), the report's extra readings
 * (GPU, trend) and its writer (oom_write.c), and the seam through which tests
 * inject NVML readings. */
#ifndef VRAM_OBSERVE_OOM_INTERNAL_H
#define VRAM_OBSERVE_OOM_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "vramkit/listener.h"
#include "vramkit/monitor.h"
#include "vramkit/nvml.h"
#include "vramkit/oom.h"

/* A pool's usage per owner or kind at the refusal. */
typedef struct vram__oom_usage {
    const char *name; /* owners: valid while the pool lives; kinds: static */
    uint64_t live_bytes, peak_live_bytes, live_blocks, budget_bytes;
} vram__oom_usage;

/* One of the last events (action: a vram_event_type). */
typedef struct vram__oom_event {
    double time_s;
    uint64_t addr, size;
    vram_stream stream;
    const char *owner; /* valid while the pool lives */
    vram_kind kind;
    int action;
} vram__oom_event;

/* What a report describes: the refusal and the pool at that moment, put
 * together from the listener's event, the state the pool captured under
 * its lock and the ring copied then (oom.c). */
typedef struct vram__oom_capture {
    double time_s;            /* wall clock of the refusal */
    int error;                /* VRAM_EBUDGET or VRAM_ENOMEM */
    const char *message;      /* the refusal's sentence */
    uint64_t size;            /* the request, as asked */
    vram_owner owner;
    const char *owner_name;
    vram_kind kind;
    vram_stream stream;
    const char *pool;         /* the pool's name (valid while it lives) */
    int gpu;                  /* the pool's gpu label (-1: none) */
    const char *backend;      /* the backend's name */
    vram_policy policy;
    uint64_t capacity;        /* the backend's capacity */
    int device_known;         /* the backend reported free and total memory */
    uint64_t device_free, device_total;
    vram_pool_stats stats;    /* with free, largest free and fragmentation */
    vram__oom_usage *owners;  /* every owner (NULL if host memory ran out) */
    size_t n_owners;
    vram__oom_usage kinds[VRAM_KIND_COUNT];
    vram__oom_event *events;  /* the ring, oldest first, the refusal last */
    size_t n_events;
    uint64_t events_total;    /* events the ring has seen since it was set up */
    const char *snapshot;     /* vram_pool_snapshot's text (NULL if host memory ran out) */
    size_t snapshot_len;
} vram__oom_capture;

/* The numbers the rules of vramkit/oom.h read. */
typedef struct vram__oom_facts {
    int error;               /* VRAM_EBUDGET or VRAM_ENOMEM */
    uint64_t request;
    const char *owner;
    uint64_t owner_live, owner_budget;
    uint64_t live, reserved, pool_free, largest_free, pending;
    double fragmentation;
    uint64_t capacity;       /* the backend's */
    int device_known;        /* device_free is known */
    uint64_t device_free;
    int gpu_known;           /* NVML read the GPU */
    int gpu_index;
    uint64_t gpu_total, gpu_used, gpu_free;
    int others_known;        /* others_bytes means something */
    uint64_t others_bytes;   /* held by other processes */
    unsigned others_count;   /* 0 when NVML would not list them */
    unsigned top_pid;        /* the other process holding the most */
    const char *top_name;
    uint64_t top_bytes;
    const char *others_note; /* how others_bytes was obtained when not exact, or NULL */
    int trend_known;
    uint32_t samples;
    double slope_per_s, slope_per_iteration, r2, confidence;
    int growing;
} vram__oom_facts;

typedef struct vram__oom_diagnosis {
    vram_oom_cause cause;
    char line[640];
} vram__oom_diagnosis;

/* Apply the rules of vramkit/oom.h. Pure: no I/O. */
void vram__oom_diagnose(const vram__oom_facts *f, vram__oom_diagnosis *out);

/* What the report read beyond the capture. */
typedef struct vram__oom_extra {
    int gpu_known;
    vram_gpu_memory gpu;
    char gpu_why[512];     /* why there is no GPU reading */
    int trend_known;
    vram_trend trend;
    char trend_why[512];   /* why there is no trend */
    uint64_t suppressed;   /* refusals not reported since the previous report */
    vram__oom_facts facts;
    vram__oom_diagnosis diagnosis;
} vram__oom_extra;

/* The report's three paths (snapshot NULL when it could not be written). */
typedef struct vram__oom_paths {
    char text[4096], json[4096], snapshot[4096];
    int have_snapshot;
    char snapshot_why[512];
} vram__oom_paths;

/* Create `dir` and its parents. 0 or VRAM_EIO naming it and why. */
int vram__oom_mkdir(const char *dir);

/* Choose the paths (reserving the text file with O_EXCL) and write the
 * snapshot, the JSON and the text. 0 or VRAM_EIO with the sentence; what
 * was written of a failed report is removed. */
int vram__oom_write(const char *dir, const vram__oom_capture *cap, const vram__oom_extra *x,
                    vram__oom_paths *paths);

/* The report's JSON, as a tree (the writer's; exposed for tests). */
cJSON *vram__oom_json(const vram__oom_capture *cap, const vram__oom_extra *x,
                      const vram__oom_paths *paths);

/* Tests: read GPUs through `fn` instead of NVML (NULL: NVML again). fn gets
 * the watch's PCI bus id (or NULL) and NVML index, and follows
 * vram_gpu_memory_read's contract. */
typedef int (*vram__oom_gpu_reader)(const char *pci_bus_id, int index, vram_gpu_memory *out);
void vram__oom_set_gpu_reader(vram__oom_gpu_reader fn);

#endif
