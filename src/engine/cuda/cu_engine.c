/* src/engine/cuda/cu_engine.c - the cuda executor's table of driver entry
 * points (cu_engine.h), filled once per process. */
#include "cu_engine.h"

vram__ecu_api vram__ecu;

VRAM_CUDA_TABLE_LOADER(vram__ecu_load, &vram__ecu, VRAM_ENGINE_CU_FUNCS)
