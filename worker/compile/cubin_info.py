"""What a cubin says of its kernels: their symbols and, for each, its parameters' sizes and types.

A kernel's parameter types are read from the compiled binary, never assumed (docs/KERNELS.md,
"Parameters"): a C++ kernel's mangled name spells them (`_Z5sgemmILi16EEvmmmfPKfS1_fPf` is
`void sgemm<16>(unsigned long, unsigned long, unsigned long, float, float const*, ...)`), and
every kernel, `extern "C"` ones too, has an `.nv.info.<symbol>` section whose KPARAM_INFO
records give each parameter's ordinal and size in bytes.

Standard library only: the confined compile processes (worker/compile/compile_sandbox.py) load this file by
path and run it over what they built, so a compiler's output is read before it reaches the worker.
"""

import ctypes
import ctypes.util
import re
import struct
from collections.abc import Iterator

_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_SHT_GNU_VERSYM = 0x6FFFFFFF
_STT_FUNC = 2
# .nv.info records: a format byte, an attribute byte, then two bytes: nothing, a byte or a u16 value,
# or (SVAL) the length of the value that follows.
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4
_EIATTR_KPARAM_INFO = 0x17
# The cubin-wide .nv.info's records of one kernel (its symbol's index, then the figure).
_EIATTR_PER_KERNEL = {0x2F: "registers", 0x11: "stack_bytes"}  # REGCOUNT, FRAME_SIZE


class CubinError(ValueError):
    """The file is not a cubin this module can read."""


def _section_headers(elf: bytes) -> list[tuple[str, tuple]]:
    """(name, raw header) of every section of a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx]
    strtab = elf[names[4]: names[4] + names[5]]

    def name_at(offset: int) -> str:
        return strtab[offset: strtab.index(b"\0", offset)].decode()

    return [(name_at(h[0]), h) for h in headers]


def _sections(elf: bytes, headers: list[tuple[str, tuple]] | None = None) -> list[tuple[str, int, bytes, int]]:
    """(name, type, contents, link) of every section of a 64-bit little-endian ELF (of `headers`, where
    the caller has read them already)."""
    return [(name, h[1], elf[h[4]: h[4] + h[5]], h[6]) for name, h in (headers or _section_headers(elf))]


def _symbols(sections: list[tuple[str, int, bytes, int]], table: int) -> Iterator[tuple[int, str, int, int, int]]:
    """(index, name, st_info, st_other, st_shndx) of every entry of the symbol tables of one kind
    (.symtab or .dynsym); the index is the entry's place in its table, which .gnu.version follows."""
    for _name, kind, data, link in sections:
        if kind != table:
            continue
        strtab = sections[link][2]
        for index, offset in enumerate(range(0, len(data), 24)):
            st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, offset)
            yield index, strtab[st_name: strtab.index(b"\0", st_name)].decode(), st_info, st_other, st_shndx


def kernel_symbols(elf: bytes) -> list[str]:
    """A cubin's kernels: the global and weak function symbols that have an .nv.info section of their
    own (a device function the compiler kept, such as 64-bit division's `$__internal_0_$__cuda_sm20_div_u64`,
    is a function symbol too, without one)."""
    sections = _sections(elf)
    described = {name.removeprefix(".nv.info.") for name, _k, _d, _l in sections if name.startswith(".nv.info.")}
    # STB_GLOBAL, or STB_WEAK: a template's instantiation is weak (NVRTC's and nvcc's alike)
    return [name for _index, name, st_info, _other, _shndx in _symbols(sections, _SHT_SYMTAB)
            if st_info & 0xF == _STT_FUNC and st_info >> 4 in (1, 2) and name in described]


def _records(info: bytes, where: str) -> Iterator[tuple[int, bytes]]:
    """(attribute, value) of each SVAL record of an .nv.info section (the others hold no value here)."""
    at = 0
    while at + 2 <= len(info):
        fmt, attr = info[at], info[at + 1]
        if fmt in (_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL):
            at += 4  # no value, a byte or a u16: each record holds four bytes
        elif fmt == _EIFMT_SVAL:
            length, = struct.unpack_from("<H", info, at + 2)
            yield attr, info[at + 4: at + 4 + length]
            at += 4 + length
        else:
            raise CubinError(f"unknown .nv.info record format {fmt} in {where}")


def parameter_sizes(elf: bytes, symbol: str) -> list[int]:
    """Each parameter's size in bytes, in declaration order, from the kernel's KPARAM_INFO records."""
    info = next((data for name, _k, data, _l in _sections(elf) if name == f".nv.info.{symbol}"), None)
    if info is None:
        raise CubinError(f"no .nv.info section for {symbol}")
    sizes: dict[int, int] = {}
    for attr, value in _records(info, symbol):
        if attr == _EIATTR_KPARAM_INFO:
            # index (u32), ordinal (u16), offset (u16), then a word whose top 14 bits are the size
            _index, ordinal, _offset, word = struct.unpack_from("<IHHI", value)
            sizes[ordinal] = word >> 18
    return [sizes[i] for i in sorted(sizes)]


def resources(elf: bytes, symbol: str) -> dict[str, int]:
    """What the compiler gave a kernel, with no GPU to ask: registers a thread (the cubin-wide .nv.info's
    REGCOUNT record for the kernel's symbol), its stack frame a thread (FRAME_SIZE: local arrays and
    spilled registers, in local memory) and static shared memory a block (its .nv.shared.<symbol>
    section). The figures `cuobjdump --dump-resource-usage` prints as REG, STACK and SHARED; a figure
    the cubin lacks is left out."""
    headers = _section_headers(elf)
    sections = _sections(elf, headers)
    index = next((i for i, name, *_ in _symbols(sections, _SHT_SYMTAB) if name == symbol), None)
    found: dict[str, int] = {}
    for name, _kind, data, _link in sections:
        if name == ".nv.info" and index is not None:
            for attr, value in _records(data, name):
                if attr in _EIATTR_PER_KERNEL and len(value) == 8:
                    owner, figure = struct.unpack_from("<II", value)
                    if owner == index:
                        found[_EIATTR_PER_KERNEL[attr]] = figure
    # Shared memory has no bytes in the file (NOBITS): its size is its header's.
    shared = [h[5] for name, h in headers if name == f".nv.shared.{symbol}"]
    if shared:
        found["static_shared_bytes"] = shared[0]
    return found


_demangler = None


def demangle(symbol: str) -> str | None:
    """The C++ spelling of a mangled name (libstdc++'s own demangler); None for a C name."""
    global _demangler
    if not symbol.startswith("_Z"):
        return None
    if _demangler is None:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        _demangler = lib.__cxa_demangle
        _demangler.restype = ctypes.c_void_p
        _demangler.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    status = ctypes.c_int()
    text = _demangler(symbol.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not text:
        return None
    try:
        return ctypes.string_at(text).decode()
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(text))


def split_signature(demangled: str) -> tuple[str, list[str]]:
    """'void ns::f<16, float>(unsigned long, float const*)' -> ('ns::f<16, float>', ['unsigned long',
    'float const*']): the name as written with its template arguments, and each parameter's type."""
    depth = 0
    # A member function's qualifiers follow its parameters ("std::ctype<char>::do_widen(char) const").
    close = len(_QUALIFIED_END.sub("", demangled)) - 1
    if close < 0 or demangled[close] != ")":
        raise CubinError(f"not a function signature: {demangled!r}")
    # The parameter list is the last parenthesised group at the top level.
    for i in range(close, -1, -1):
        ch = demangled[i]
        depth += ch in ")>"
        depth -= ch in "(<"
        if depth == 0:
            open_at = i
            break
    else:
        raise CubinError(f"unbalanced signature: {demangled!r}")
    head, params = demangled[:open_at], demangled[open_at + 1: close]
    # The return type ("void ") comes before the name at the top level.
    depth, name_start = 0, 0
    for i, ch in enumerate(head):
        depth += ch in "(<"
        depth -= ch in ")>"
        if ch == " " and depth == 0:
            name_start = i + 1
    return head[name_start:], _split_top_level(params)


# What may follow a function's parameter list: cv- and ref-qualifiers, noexcept.
_QUALIFIED_END = re.compile(r"(?:\s*(?:const|volatile|&&|&|noexcept))+$")


def _split_top_level(params: str) -> list[str]:
    if params.strip() in ("", "void"):
        return []
    out, depth, start = [], 0, 0
    for i, ch in enumerate(params):
        depth += ch in "(<"
        depth -= ch in ")>"
        if ch == "," and depth == 0:
            out.append(params[start:i].strip())
            start = i + 1
    out.append(params[start:].strip())
    return out


def describe(elf: bytes) -> list[dict]:
    """Every kernel of the cubin: its symbol, its C++ name with template arguments (None for an
    `extern "C"` kernel), and its parameters as [type or None, size in bytes]."""
    kernels = []
    for symbol in kernel_symbols(elf):
        sizes = parameter_sizes(elf, symbol)
        demangled = demangle(symbol)
        name, types = split_signature(demangled) if demangled else (symbol, [None] * len(sizes))
        if len(types) != len(sizes):  # a parameter pack or an empty struct: trust the sizes, not the spelling
            types = [None] * len(sizes)
        kernels.append({"symbol": symbol, "name": name if demangled else None,
                        "params": [[t, s] for t, s in zip(types, sizes)]})
    return kernels


def host_functions(elf: bytes) -> list[dict]:
    """A shared library's exported functions (.dynsym: defined, global or weak, default visibility):
    its symbol, its C++ name with template arguments (None for an `extern "C"` function, whose
    parameter types no binary records) and its parameter types ([type, None]: a host function has
    no .nv.info to give sizes). What a launcher is found among and planned from."""
    out = []
    for _index, symbol, st_info, st_other, st_shndx in _symbols(_sections(elf), _SHT_DYNSYM):
        if st_info & 0xF != _STT_FUNC or st_info >> 4 not in (1, 2) or st_shndx == 0 or st_other & 3:
            continue
        demangled = demangle(symbol)
        try:
            name, types = split_signature(demangled) if demangled else (None, [])
        except CubinError:  # a function of the C++ library a unit linked in, not one a launcher can be
            continue
        out.append({"symbol": symbol, "name": name, "params": [[t, None] for t in types]})
    return out


def unresolved_symbols(elf: bytes) -> list[str]:
    """What a shared library calls that none of its own units defines and none of the libraries it was
    linked with gives: undefined, global (not weak) and unversioned in .dynsym. The C and C++
    libraries the host compiler links version every symbol they give (GLIBC_2.2.5, GLIBCXX_3.4, ...),
    so an unversioned one is found at load time or never."""
    sections = _sections(elf)
    versions = next((data for _name, kind, data, _link in sections if kind == _SHT_GNU_VERSYM), None)
    out = []
    for index, name, st_info, _other, st_shndx in _symbols(sections, _SHT_DYNSYM):
        version = struct.unpack_from("<H", versions, 2 * index)[0] & 0x7FFF if versions else 1
        if st_shndx == 0 and st_info >> 4 == 1 and name and version <= 1:
            out.append(name)
    return out


# The launcher unit (worker/compile/compile_sandbox.py) declares this function with one parameter, of the
# type of the launcher's address: its mangled name then spells the launcher's own parameter types,
# whatever C++ name reached it (a namespace, a using-declaration, a static member of a class
# template, an extern "C" function, which spells none of its own).
SIGNATURE_FUNCTION = "gemmwatch_launcher_signature"


class NotAFunction(CubinError):
    """The launcher names something no plain call reaches (a non-static member function)."""


def launcher_signature(elf: bytes) -> tuple[str, list[str]]:
    """The launcher's return type and parameter types, read from the signature function the launcher
    unit exports: ('void', ['int', 'float*'])."""
    for function in host_functions(elf):
        if function["name"] != SIGNATURE_FUNCTION or len(function["params"]) != 1:
            continue
        pointer = function["params"][0][0].strip()
        params = function_pointer_parameters(pointer)
        return pointer[:pointer.find("(*)(")].strip(), params
    raise CubinError(f"the library exports no {SIGNATURE_FUNCTION}: the launcher unit was not built")


def function_pointer_parameters(spelling: str) -> list[str]:
    """'void (*)(int, float*)' -> ['int', 'float*']; a pointer to a member function
    ('void (Gemm::*)(int)') is a NotAFunction: it needs an object to be called on."""
    spelling = _QUALIFIED_END.sub("", spelling.strip())
    if "(*)(" not in spelling:
        if "::*)(" in spelling:
            raise NotAFunction(f"{spelling} is a non-static member function: it needs an object to be called on; "
                               "name a free function or a static member")
        raise CubinError(f"not a function pointer: {spelling!r}")
    _name, params = split_signature("f" + spelling[spelling.index("(*)(") + 3:])
    return params
