"""The persistent kernels' grid (balanced_grid in core/description/kernel_expr.py): the fewest blocks
that keep the fewest waves of tiles, at most one an SM, so that every block walks as many tiles. At
4096³ on a 132-SM card, 512 tiles of 128×256 ran on 132 blocks of which 16 walked 3 tiles and 116
walked 4; on 128 blocks of 4 the kernel lasts as long and 4 SMs idle at the power cap (issue 53: 98.4 %
of cuBLAS became 99.5 % on the H200)."""

import pytest

from core.description.builtins import builtin_kernels
from core.description.kernel import resolve
from core.description.kernel_expr import ExprError, balanced_grid, evaluate
from tests.fake_gpu import H100_FIGURES


def waves(tiles: int, blocks: int) -> int:
    return -(-tiles // blocks)


@pytest.mark.parametrize(("tiles", "slots", "blocks"), [(512, 132, 128), (2048, 132, 128), (128, 132, 128),
                                                        (32, 132, 32), (133, 132, 67), (264, 132, 132), (1, 1, 1)])
def test_the_grid_of_some_sizes(tiles, slots, blocks):
    assert balanced_grid(tiles, slots) == blocks


def test_the_fewest_blocks_that_keep_the_fewest_waves_every_block_walking_as_many_tiles_or_one_fewer():
    for tiles in range(1, 3000, 7):
        for slots in (1, 2, 7, 66, 114, 132, 144, 170):
            blocks = balanced_grid(tiles, slots)
            fewest = waves(tiles, slots)
            assert 1 <= blocks <= slots and waves(tiles, blocks) == fewest, (tiles, slots, blocks)
            assert blocks == 1 or waves(tiles, blocks - 1) > fewest, (tiles, slots, blocks)  # none fewer will do
            # Every block walks `fewest` tiles, or one fewer: none is left a short last wave of its own.
            assert tiles > (fewest - 1) * blocks, (tiles, slots, blocks)


def test_no_tiles_no_blocks_and_no_slots_is_an_error():
    assert balanced_grid(0, 132) == 0
    with pytest.raises(ExprError, match="slots must be positive"):
        evaluate("balanced_grid(512, SM_COUNT)", {"SM_COUNT": 0})


@pytest.mark.parametrize(("name", "tile_n"), [("bf16_wgmma_persistent", 256), ("fp16_wgmma_persistent", 256),
                                           ("bf16_wgmma_tn_persistent", 256), ("tf32_wgmma_tn", 256),
                                           ("fp8_wgmma_tn", 128), ("fp8_wgmma_tn_192", 192), ("fp8_wgmma_tn_176", 176),
                                           ("fp8_wgmma_tn_64", 64),
                                           ("bf16_wgmma_persistent_64", 64)])
def test_the_built_in_persistent_kernels_launch_the_balanced_grid(name, tile_n):
    launch = resolve(builtin_kernels()[name], {}, H100_FIGURES, "builtin")
    sms = H100_FIGURES.scope()["SM_COUNT"]
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (1000, 1003, 997), (1024, 1024, 1024)):
        tiles = waves(m, 128) * waves(n, tile_n)
        assert launch.grid(m, n, k) == (balanced_grid(tiles, sms), 1, 1), (name, m, n, k)
    if tile_n == 176:  # 768 tiles at 4096^3: 128 blocks of 6, 97 % of the slots used (192-wide: 704, 89 %)
        assert launch.grid(4096, 4096, 4096) == (128, 1, 1)
    if tile_n == 256:  # 512 tiles on 132 SMs: 128 blocks of 4, where min(tiles, SM_COUNT) gave 132
        assert sms == 132 and launch.grid(4096, 4096, 4096) == (128, 1, 1)
