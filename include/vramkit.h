/* vramkit.h - the public API of vramkit in one header. Four libraries
 * serve it; a program links those whose functions it calls:
 *   libvramkit-core     errors, options, logging, versions, devices, NVML,
 *                       backends, pools, statistics, listeners, traces and
 *                       the PyTorch allocator (vramkit/types.h ... torch.h)
 *   libvramkit-observe  the monitor, metrics, OOM reports and the report
 *                       page (monitor.h, metrics.h, oom.h, report.h)
 *   libvramkit-engine   ONNX engines and .npy files (engine.h, npy.h)
 *   libvramkit-service  the multi-stream video service: sources and
 *                       preprocessing, BlazeFace decoding, the service
 *                       (video.h, blazeface.h, service.h; fleet.h: one
 *                       service per GPU)
 * (pkg-config names vramkit-core, vramkit-observe, vramkit-engine and
 * vramkit-service; CMake's find_package(vramkit) targets vramkit::core,
 * vramkit::observe, vramkit::engine and vramkit::service).
 * vramkit/cuda_table.h, for code that calls the CUDA driver itself, is not
 * included here: it needs the CUDA toolkit.
 *
 * Errors and ownership, everywhere: 0 or a negative VRAM_E* code, the
 * sentence in vram_last_error(), *out NULL on error, every create paired
 * with its destroy (vramkit/error.h states the rules; each header its
 * exceptions). Objects are made in this order and destroyed in the
 * reverse one: device, backend, pool, then what uses a pool (an engine and
 * its execution contexts, a monitor, a metrics server, an OOM watch). A
 * device, backend, pool or engine refuses to go with VRAM_EBUSY while
 * something made from it lives (the device: a backend or an acquired
 * stream; the backend: a pool; the pool: a live block, such as an engine's
 * weights; the engine: an execution context). What only watches must let go
 * first, since nothing checks: remove a pool from a monitor or a metrics
 * server before destroying it (an OOM watch ends with its pool), and stop a
 * metrics server and end an OOM watch before stopping their monitor. */
#ifndef VRAMKIT_H
#define VRAMKIT_H

#include "vramkit/version.h"
#include "vramkit/types.h"
#include "vramkit/error.h"
#include "vramkit/config.h"
#include "vramkit/log.h"
#include "vramkit/device.h"
#include "vramkit/nvml.h"
#include "vramkit/backend.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/listener.h"
#include "vramkit/trace.h"
#include "vramkit/torch.h"
#include "vramkit/engine.h"
#include "vramkit/npy.h"
#include "vramkit/monitor.h"
#include "vramkit/metrics.h"
#include "vramkit/oom.h"
#include "vramkit/report.h"
#include "vramkit/video.h"
#include "vramkit/blazeface.h"
#include "vramkit/service.h"
#include "vramkit/fleet.h"

#endif
