/* src/core/base/version.c - which vramkit a program runs with
 * (vramkit/version.h). */
#include "vramkit/version.h"

unsigned vram_version(void) { return VRAM_VERSION; }

const char *vram_version_string(void) { return VRAM_VERSION_STRING; }
