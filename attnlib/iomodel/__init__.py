"""Part I/O: the two-level memory machine and the attention algorithms that run on it.

Every algorithm here runs on :class:`TwoLevelMemory`, which counts each word moved between
a fast memory of M words and the slow memory, and has a closed-form twin (``*_count``)
that the tests require to agree with the simulation exactly. The lower bounds are in
:mod:`attnlib.iomodel.bounds`.
"""

from .bounds import (
    backward_lower_bound,
    forward_lower_bound,
    matmul_lower_bound,
    sparse_lower_bound,
)
from .flash import (
    expand_block_mask,
    fa1_blocks,
    flash_backward,
    flash_backward_blocks,
    flash_backward_count,
    flash_backward_min_M,
    flash_backward_working_set,
    flash_block_mask,
    flash_forward,
    flash_forward_blocks,
    flash_forward_count,
    flash_forward_min_M,
    flash_forward_working_set,
    standard_backward,
    standard_backward_count,
    standard_forward,
    standard_forward_count,
)
from .machine import CapacityError, IOCount, MachineError, Op, TwoLevelMemory
from .matmul import (
    matmul_tile_size,
    naive_matmul,
    naive_matmul_count,
    tiled_matmul,
    tiled_matmul_count,
)
from .smallcache import (
    smallcache_backward,
    smallcache_backward_count,
    smallcache_backward_tile,
    smallcache_forward,
    smallcache_forward_count,
    smallcache_forward_tile,
)

__all__ = [
    "TwoLevelMemory",
    "IOCount",
    "CapacityError",
    "MachineError",
    "Op",
    "naive_matmul",
    "naive_matmul_count",
    "tiled_matmul",
    "tiled_matmul_count",
    "matmul_tile_size",
    "flash_forward",
    "flash_backward",
    "flash_forward_count",
    "flash_backward_count",
    "standard_forward",
    "standard_backward",
    "standard_forward_count",
    "standard_backward_count",
    "flash_forward_blocks",
    "flash_backward_blocks",
    "flash_forward_min_M",
    "flash_backward_min_M",
    "flash_forward_working_set",
    "flash_backward_working_set",
    "fa1_blocks",
    "flash_block_mask",
    "expand_block_mask",
    "smallcache_forward",
    "smallcache_backward",
    "smallcache_forward_count",
    "smallcache_backward_count",
    "smallcache_forward_tile",
    "smallcache_backward_tile",
    "matmul_lower_bound",
    "forward_lower_bound",
    "backward_lower_bound",
    "sparse_lower_bound",
]
