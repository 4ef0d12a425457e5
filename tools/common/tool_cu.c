/* tools/common/tool_cu.c - the command line's table of driver entry points
 * (tool_cu.h), filled once per process. */
#include "tool_cu.h"

vram_tool_cu_api vram_tool_cu;

VRAM_CUDA_TABLE_LOADER(vram_tool_cu_load, &vram_tool_cu, VRAM_TOOL_CU_FUNCS)
