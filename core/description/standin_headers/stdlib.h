// gemmwatch stand-in for <stdlib.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
