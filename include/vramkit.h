/* vramkit.h - the public API of vramkit in one header: errors, options,
 * logging, backends, pools, statistics, traces and trace replay. */
#ifndef VRAMKIT_H
#define VRAMKIT_H

#include "vramkit/types.h"
#include "vramkit/error.h"
#include "vramkit/config.h"
#include "vramkit/log.h"
#include "vramkit/backend.h"
#include "vramkit/pool.h"
#include "vramkit/stats.h"
#include "vramkit/trace.h"
#include "vramkit/replay.h"

#endif
