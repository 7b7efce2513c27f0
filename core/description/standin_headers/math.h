// gemmwatch stand-in for <math.h>: see cmath.
#pragma once
#include "cmath"
