// gemmwatch stand-in for <stdio.h>: see gemmwatch_host.h.
#pragma once
#include "gemmwatch_host.h"
