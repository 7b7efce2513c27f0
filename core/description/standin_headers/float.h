// gemmwatch stand-in for <float.h>: see cfloat.
#pragma once
#include "cfloat"
