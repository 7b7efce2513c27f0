// gemmwatch stand-in for <cuda.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
