// gemmwatch stand-in for <device_launch_parameters.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
