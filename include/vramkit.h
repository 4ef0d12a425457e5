/* vramkit.h - the public API of vramkit in one header: errors, options,
 * logging, devices, NVML readings, context costs, backends, pools,
 * statistics, traces, trace replay and the PyTorch allocator. */
#ifndef VRAMKIT_H
#define VRAMKIT_H

#include "vramkit/types.h"
#include "vramkit/error.h"
#include "vramkit/config.h"
#include "vramkit/log.h"
#include "vramkit/device.h"
#include "vramkit/nvml.h"
#include "vramkit/ctxcost.h"
#include "vramkit/backend.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/listener.h"
#include "vramkit/trace.h"
#include "vramkit/replay.h"
#include "vramkit/torch.h"
#include "vramkit/engine.h"
#include "vramkit/monitor.h"
#include "vramkit/metrics.h"
#include "vramkit/oom.h"
#include "vramkit/report.h"

#endif
