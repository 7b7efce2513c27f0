// gemmwatch: PyTorch's <torch/types.h>, as the stand-in declares it (gemmwatch/torch_stand_in.h).
#pragma once
#include <gemmwatch/torch_stand_in.h>
