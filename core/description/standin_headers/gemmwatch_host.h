// gemmwatch's stand-in for a host C or C++ library header (docs/KERNELS.md, "Includes").
// Kernels are compiled by NVRTC, which has no host library: printf, assert, size_t, the math
// functions and ::min/::max are built into it already. What kernel files habitually take from
// their host headers besides is given here, and nothing else.
#pragma once
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
