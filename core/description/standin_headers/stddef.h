// gemmwatch stand-in for <stddef.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
