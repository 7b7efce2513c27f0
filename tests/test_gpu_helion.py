"""Issue 50 on the GPU: a Helion kernel (tests/fixtures/helion_kernel) whose Triton code the worker has Helion
write in the confined compile process, on torch's meta device, then compiles, verifies against cuBLAS and
times. Also: the code written on the meta device is the code Helion writes for the same kernel called on
CUDA tensors. Skipped where no CUDA device exists."""

import re

import pytest

from core.settings import Settings
from tests.test_helion_kernels import described
from worker.measure.cases import Case, KernelChoice, TimingPolicy

pytestmark = pytest.mark.gpu
pytest.importorskip("helion")
POLICY = TimingPolicy.from_settings(Settings(GEMMWATCH_CASE_TIME_CAP_S=1.0))


@pytest.fixture(scope="module")
def runner():
    from worker.measure.runner import CupyRunner

    return CupyRunner()


def run(runner, desc, size):
    return runner.run_case(Case(0, desc.name, *size, 7, KernelChoice(desc, {}, "job")), POLICY)


@pytest.mark.parametrize("size", [(1000, 1003, 997), (64, 4096, 256), (1024, 1024, 1024)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", ["helion_pinned", "helion_open"])
def test_a_helion_kernel_is_verified_and_timed_on_the_gpu(runner, name, size):
    out = run(runner, described(name), size)
    assert out.verified, out.error
    assert out.gflops > 0 and out.pct_of_cublas > 0
    assert out.env["resources"]["compiler"].startswith("Triton ")
    assert out.env["helion"]["version"] and out.env["launch"]["entry"] == f"_helion_{described(name).wrapper}"


def test_a_helion_kernel_that_skips_a_k_slab_is_refused(runner):
    out = run(runner, described("helion_first_slab_skipped"), (512, 512, 512))
    assert not out.verified and out.gflops is None
    assert "relative error" in out.error, out.error


def _without_origin_lines(code: str) -> str:
    return "\n".join(line for line in code.splitlines() if not re.match(r"\s*# src\[", line))


@pytest.mark.parametrize("layout", ["row", "col"])
def test_the_code_written_on_the_meta_device_is_the_code_written_for_cuda_tensors(runner, layout, tmp_path,
                                                                                   monkeypatch):
    """Helion called here, in this process, on CUDA tensors of the case's shape and strides, writes the same
    Triton code as the confined compile process wrote on meta tensors (lines naming the source aside)."""
    import importlib.util

    import torch

    import helion

    desc = described("helion_open", layout={"A": "row", "B": layout, "C": "row"})
    m, n, k = 1000, 1003, 997
    written = runner.device.helion_code(desc, (m, n, k))
    (tmp_path / "tiles.py").write_text(desc.files["tiles.py"])
    spec = importlib.util.spec_from_file_location("gemmwatch_helion_tiles", tmp_path / "tiles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    a = torch.empty(m, k, device="cuda", dtype=torch.float16)
    b = torch.empty(k, n, device="cuda", dtype=torch.float16) if layout == "row" else \
        torch.empty(n, k, device="cuda", dtype=torch.float16).T
    on_cuda = module.open_product.bind((a, b)).to_triton_code(helion.Config(**desc.helion))
    assert _without_origin_lines(written.code) == _without_origin_lines(on_cuda)


@pytest.mark.parametrize("size", [(1000, 1003, 997), (64, 64, 4096)], ids=lambda s: "x".join(map(str, s)))
def test_a_split_k_kernel_is_verified_with_c_zeroed_before_each_call(runner, size):
    out = run(runner, described("helion_split_k"), size)
    assert out.verified, out.error
    assert out.env["launch"]["c_starts_zero"] is True and out.gflops > 0


def test_the_same_split_k_kernel_without_its_zeroing_is_wrong(runner):
    """What c_starts_zero is for, on the GPU: the launch read off the wrapper, its zeroing taken away, adds
    its pieces onto what C held (the check's fill) and is refused."""
    from core.description.kernel_description import KernelDescription

    case = Case(0, "helion_split_k", 512, 512, 512, 7, KernelChoice(described("helion_split_k"), {}, "job"))
    read = runner.wrappers_read(case).kernel.description
    assert read.c_starts_zero
    unzeroed = KernelDescription.model_validate({**read.model_dump(mode="json", exclude_none=True),
                                                 "c_starts_zero": False})
    out = run(runner, unzeroed, (512, 512, 512))
    assert not out.verified and out.gflops is None, out.error
