"""Part I/O: the two-level memory machine and the attention algorithms that run on it.

Every algorithm here runs on :class:`TwoLevelMemory`, which counts each word moved between
a fast memory of M words and the slow memory, and has a closed-form twin (``*_count``)
that the tests require to agree with the simulation exactly. The lower bounds are in
:mod:`attnlib.iomodel.bounds`; the exact optimum of the red-blue pebble game on small
computation graphs (:mod:`~attnlib.iomodel.graphs`) is in :mod:`attnlib.iomodel.optimal`,
and our own schedules as game moves in :mod:`attnlib.iomodel.pebbling`.
"""

from .bounds import (
    backward_lower_bound,
    forward_lower_bound,
    matmul_lower_bound,
    matmul_sharp_lower_bound,
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
from .graphs import (
    ComputationGraph,
    attention_dv_graph,
    attention_forward_graph,
    evaluate_graph,
    inner_product_graph,
    least_feasible_M,
    matmul_graph,
    trivial_io_bound,
)
from .machine import CapacityError, IOCount, MachineError, Op, TwoLevelMemory
from .matmul import (
    matmul_tile_size,
    naive_matmul,
    naive_matmul_count,
    tiled_matmul,
    tiled_matmul_count,
)
from .optimal import (
    MAX_VERTICES,
    OptimalSchedule,
    is_dominator,
    optimal_io,
    replay_schedule,
    schedule_segments,
)
from .pebbling import loop_order_moves, tiled_matmul_moves
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
    "matmul_sharp_lower_bound",
    "ComputationGraph",
    "inner_product_graph",
    "matmul_graph",
    "attention_forward_graph",
    "attention_dv_graph",
    "evaluate_graph",
    "least_feasible_M",
    "trivial_io_bound",
    "MAX_VERTICES",
    "OptimalSchedule",
    "optimal_io",
    "replay_schedule",
    "schedule_segments",
    "is_dominator",
    "tiled_matmul_moves",
    "loop_order_moves",
]
