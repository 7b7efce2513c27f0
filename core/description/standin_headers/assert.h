// gemmwatch stand-in for <assert.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
