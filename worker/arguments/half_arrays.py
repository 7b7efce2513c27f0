"""Matrices in a kernel's input and output types, through the device's array module (NumPy on CI,
CuPy on a GPU), so the same code rounds inputs and reads outputs on both.

FP16 is NumPy's and CuPy's float16. Neither has a bfloat16, so a BF16 matrix is held as uint16
with the BF16 bits (the upper half of the float32 it rounds), which is what a kernel's
__nv_bfloat16 pointer reads; every uint16 matrix here is BF16. Nor has either an FP8 type: an
E4M3 matrix is held as uint8 with the E4M3 bits (sign, 4 exponent bits biased by 7, 3 fraction
bits; what __nv_fp8_e4m3 reads); every uint8 matrix here is E4M3.
"""

E4M3_LARGEST = 448.0
E4M3_MIN_NORMAL_EXP = -6  # the smallest normal number is 2^-6; below it the spacing stays 2^-9


def rounded(xp, x32, dtype: str):
    """float32 values rounded to nearest (ties to even) in `dtype`, in its storage type."""
    if dtype == "float32":
        return x32
    if dtype == "float16":
        return x32.astype(xp.float16)
    if dtype == "float8_e4m3":
        return _e4m3_bits(xp, _e4m3_values_of(xp, x32))
    bits = x32.view(xp.uint32)
    # Adding 0x7FFF plus the kept half's lowest bit, then dropping the low 16 bits, rounds to
    # nearest with ties to even; NaN stays NaN (its quiet bit is above the cut) and Inf stays Inf.
    return ((bits + (xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1)))) >> 16).astype(xp.uint16)


def as_float32(xp, x):
    """A matrix of any of the four types as float32 values (exact: FP16, BF16 and E4M3 fit in FP32)."""
    if x.dtype == xp.uint16:
        return (x.astype(xp.uint32) << 16).view(xp.float32)
    if x.dtype == xp.uint8:
        b = x.astype(xp.int32)
        exponent, fraction = (b >> 3) & 0xF, (b & 7).astype(xp.float32)
        # Normal: (1 + f/8) 2^(e-7) = (8 + f) 2^(e-10); subnormal (e = 0): f 2^-9.
        magnitude = xp.where(exponent == 0, xp.ldexp(fraction, xp.full_like(b, -9)),
                             xp.ldexp(fraction + 8, exponent - 10)).astype(xp.float32)
        return xp.where((b & 0x80) != 0, -magnitude, magnitude)
    return x if x.dtype == xp.float32 else x.astype(xp.float32)


def type_of(x) -> str:
    """The element type a matrix holds, by its storage type."""
    return {"float32": "float32", "float16": "float16", "uint16": "bfloat16", "uint8": "float8_e4m3"}[str(x.dtype)]


def _e4m3_values_of(xp, x32):
    """float32 values rounded to nearest E4M3 values (ties to even), still as float32; beyond
    +-448 they saturate to it (E4M3 has no infinity; the runner's inputs stay within +-256)."""
    _, e = xp.frexp(x32)  # x = f 2^e with f in [0.5, 1): the leading bit is worth 2^(e-1)
    step = xp.maximum(e - 1, E4M3_MIN_NORMAL_EXP) - 3  # 3 fraction bits below it
    q = xp.ldexp(xp.rint(xp.ldexp(x32, -step)), step).astype(xp.float32)  # scaling by 2^n is exact
    return xp.clip(q, -E4M3_LARGEST, E4M3_LARGEST)


def _e4m3_bits(xp, q):
    """E4M3 values (float32 that are exactly E4M3 numbers) as their uint8 bits."""
    a = xp.abs(q)
    _, e = xp.frexp(a)
    normal = a >= 2.0**E4M3_MIN_NORMAL_EXP
    lead = e - 1
    exponent = xp.where(normal, lead + 7, 0)
    fraction = xp.where(normal, xp.ldexp(a, -lead) * 8 - 8, xp.ldexp(a, xp.full_like(e, 9)))
    bits = (exponent << 3) | fraction.astype(xp.int32) | xp.where(xp.signbit(q), 0x80, 0)
    return bits.astype(xp.uint8)
