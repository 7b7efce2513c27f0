// gemmwatch stand-in for <cublas.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
