// gemmwatch stand-in for <cuda_runtime_api.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
