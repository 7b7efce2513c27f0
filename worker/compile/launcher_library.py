"""A repository's own host launcher (`"launcher": "launch_gemm<float>"`), built into a shared library
and planned: which exported function it is, and how each of its arguments is passed through ctypes.

The build is nvcc's `-shared -Xcompiler -fPIC` (cudart static, nvcc's default) of the kernel's files
in the confined compile process (worker/compile/compiler.py, worker/compile/compile_sandbox.py), cached by content
like a cubin. The launcher's parameter types are read from the library's .dynsym, as a kernel's
are read from its cubin (worker/compile/cubin_info.py): the launcher unit exports a function whose one
parameter is the launcher's address, and its mangled name spells the launcher's types, whatever
C++ name the description used (a namespace, a using-declaration, a class template's static member,
an extern "C" function). It is called through that address. Nothing
of the library runs here: it is only ever loaded in a confined process of its case's own
(worker/measure/launcher_case.py).
"""

import ctypes
from dataclasses import dataclass
from pathlib import Path

import numpy

from core.description.kernel import Launch
from worker.compile import compiler
from worker.arguments import half_arrays, kernel_args, tensor_maps, torch_tensors


@dataclass(frozen=True)
class LauncherLibrary:
    path: Path  # the library in the kernel cache (copied to a folder of its case's own before it is called)
    symbol: str  # the exported function that returns the launcher's address (the launcher unit's)
    plan: kernel_args.ArgPlan
    compiler: str  # "nvcc 13.5.37"


def build(launch: Launch, compute_capability: str, cfg) -> LauncherLibrary:
    """The launch's launcher, built and planned; CompileRefused where the library exports no such
    function, ArgumentMismatch where its parameters do not fit the description's args."""
    built = compiler.compile_launch(launch, compute_capability, cfg, library=True)
    function, = built.kernels  # the launcher, as the launcher unit spelled its type (worker/compile/compile_sandbox.py)
    precision = launch.precision
    arg_plan = kernel_args.plan(launch.launcher, launch.args, function["params"], precision.input_type,
                                precision.output_type, host=True)
    returns = function.get("returns", "void")
    if torch_tensors.returns_c(arg_plan) and returns != kernel_args.TENSOR:
        raise kernel_args.ArgumentMismatch(
            f"{launch.launcher} returns {returns}, and args name no C: a launcher that makes C returns it "
            "(torch::Tensor); one that writes a C it is given takes it, named C in args")
    return LauncherLibrary(built.cubin_path, function["symbol"], arg_plan, built.compiler)


class Dim3(ctypes.Structure):
    """CUDA's dim3, passed by value as its runner passes a launcher's grid or block."""

    _fields_ = [("x", ctypes.c_uint32), ("y", ctypes.c_uint32), ("z", ctypes.c_uint32)]


_CTYPES = {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "u64": ctypes.c_uint64,
           "u16": ctypes.c_uint16, "b8": ctypes.c_bool,
           "f32": ctypes.c_float, "f64": ctypes.c_double,
           # __half and __nv_bfloat16 are 2-byte structs: passed (and read through a pointer) as their bits
           "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16, kernel_args.DIM3: Dim3}


def _scalar(kind: str, x):
    """A value of the parameter's own type, as ctypes holds it."""
    if kind == "f16":
        return ctypes.c_uint16(int(numpy.float16(x).view(numpy.uint16)))
    if kind == kernel_args.DIM3:
        return Dim3(int(x), 1, 1)
    if kind == "bf16":
        return ctypes.c_uint16(int(half_arrays.rounded(numpy, numpy.array([x], dtype=numpy.float32), "bfloat16")[0]))
    return _CTYPES[kind](x)


@dataclass(frozen=True)
class CallArguments:
    argtypes: tuple
    values: tuple
    host_scalars: tuple  # what the host pointers point to, kept alive as long as the call can run


def arguments(arg_plan: kernel_args.ArgPlan, named: dict, address) -> CallArguments:
    """The launcher's arguments in order, from the values by role; `address` gives a matrix's (or
    the stream's) address as an int: device memory on the GPU, host memory on the CPU double."""
    argtypes, values, cells = [], [], []
    made_c = None  # a launcher that makes C itself gets the case's C there (torch_tensors.returns_c)
    if torch_tensors.returns_c(arg_plan):
        made_c = torch_tensors.record(address(named["C"]), named[kernel_args.tensor_view_key("C")])
        cells.append(made_c)
    for role, how in arg_plan.passing:
        x = kernel_args.role_value(role, named)
        if how == "ptr":
            argtypes.append(ctypes.c_void_p)
            values.append(address(x))
        elif how == "null":
            argtypes.append(ctypes.c_void_p)
            values.append(None)
        elif how in ("tensor", "&tensor"):  # the stand-in's at::Tensor: one pointer, to the matrix's record
            rec = torch_tensors.record(address(x), named[kernel_args.tensor_view_key(role)])
            if made_c is not None:  # what its torch::empty of C's sizes returns
                rec.output = ctypes.addressof(made_c)
            cells.append(rec)
            at = ctypes.addressof(rec)
            if how == "&tensor":  # a reference: the address of a Tensor, which holds the record's
                cell = ctypes.c_void_p(at)
                cells.append(cell)
                at = ctypes.addressof(cell)
            argtypes.append(ctypes.c_void_p)
            values.append(at)
        elif how == "&map":  # a tensor map's 128 bytes in host memory
            cell, at = tensor_maps.host_map(bytes(x))
            cells.append(cell)
            argtypes.append(ctypes.c_void_p)
            values.append(at)
        elif how.startswith("&"):  # a host pointer to a scalar of the parameter's type
            cell = _scalar(how[1:], x)
            cells.append(cell)
            argtypes.append(ctypes.c_void_p)
            values.append(ctypes.addressof(cell))
        else:
            argtypes.append(_CTYPES[how])
            values.append(_scalar(how, x))
    return CallArguments(tuple(argtypes), tuple(values), tuple(cells))
