// gemmwatch stand-in for <limits.h>: see climits.
#pragma once
#include "climits"
