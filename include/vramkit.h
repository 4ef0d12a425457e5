/* vramkit.h - the public API of vramkit in one header. Three libraries
 * serve it; a program links those whose functions it calls:
 *   libvramkit-core     errors, options, logging, versions, devices, NVML,
 *                       backends, pools, statistics, listeners, traces and
 *                       the PyTorch allocator (vramkit/types.h ... torch.h)
 *   libvramkit-observe  the monitor, metrics, OOM reports and the report
 *                       page (monitor.h, metrics.h, oom.h, report.h)
 *   libvramkit-engine   ONNX engines and .npy files (engine.h, npy.h)
 * (pkg-config names vramkit-core, vramkit-observe and vramkit-engine;
 * CMake's find_package(vramkit) targets vramkit::core, vramkit::observe and
 * vramkit::engine). vramkit/cuda_table.h, for code that calls the CUDA
 * driver itself, is not included here: it needs the CUDA toolkit. */
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

#endif
