// gemmwatch stand-in for <stdint.h>: see cstdint.
#pragma once
#include "cstdint"
