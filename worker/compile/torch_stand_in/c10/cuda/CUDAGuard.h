// gemmwatch: PyTorch's <c10/cuda/CUDAGuard.h>, as the stand-in declares it (gemmwatch/torch_stand_in.h).
#pragma once
#include <gemmwatch/torch_stand_in.h>
