"""Matrices in a kernel's input and output types, through the device's array module (NumPy on CI,
CuPy on a GPU), so the same code rounds inputs and reads outputs on both.

FP16 is NumPy's and CuPy's float16. Neither has a bfloat16, so a BF16 matrix is held as uint16
with the BF16 bits (the upper half of the float32 it rounds), which is what a kernel's
__nv_bfloat16 pointer reads; every uint16 matrix here is BF16.
"""

STORAGE = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}


def storage_dtype(xp, dtype: str):
    return getattr(xp, STORAGE[dtype])


def rounded(xp, x32, dtype: str):
    """float32 values rounded to nearest (ties to even) in `dtype`, in its storage type."""
    if dtype == "float32":
        return x32
    if dtype == "float16":
        return x32.astype(xp.float16)
    bits = x32.view(xp.uint32)
    # Adding 0x7FFF plus the kept half's lowest bit, then dropping the low 16 bits, rounds to
    # nearest with ties to even; NaN stays NaN (its quiet bit is above the cut) and Inf stays Inf.
    return ((bits + (xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1)))) >> 16).astype(xp.uint16)


def as_float32(xp, x):
    """A matrix of any of the three types as float32 values (exact: FP16 and BF16 fit in FP32)."""
    if x.dtype == xp.uint16:
        return (x.astype(xp.uint32) << 16).view(xp.float32)
    return x if x.dtype == xp.float32 else x.astype(xp.float32)


def type_of(x) -> str:
    """The element type a matrix holds, by its storage type."""
    return {"float32": "float32", "float16": "float16", "uint16": "bfloat16"}[str(x.dtype)]
