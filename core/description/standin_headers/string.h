// gemmwatch stand-in for <string.h>: NVRTC has memcpy and memset in device code already; strlen,
// which a logging header may take from here too, is added.
#pragma once
#include "gemmwatch_host.h"
__host__ __device__ inline size_t strlen(const char *s) { size_t n = 0; while (s[n] != '\0') ++n; return n; }
