// gemmwatch stand-in for <cublas_v2.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
