"""Part I of the book: I/O complexity on a two-level memory machine.

Every algorithm here runs on :class:`TwoLevelMemory`, which counts each word moved between a
fast memory of M words and the slow memory, and has a closed-form twin (``*_count``) that the
tests require to agree with the simulation exactly. The modules, in the book's order:

* :mod:`.machine` — the machine (:class:`TwoLevelMemory`, :class:`IOCount`,
  :class:`CapacityError`, :class:`MachineError`) and where a run's words went
  (:func:`words_by_array`); :mod:`.tiling` — the bookkeeping every schedule shares;
* :mod:`.matmul` — matrix multiplication by rows and by square tiles (:func:`naive_matmul`,
  :func:`tiled_matmul`, :func:`matmul_tile_size`), with their counts;
* :mod:`.graphs` — computation graphs for the red-blue pebble game
  (:class:`ComputationGraph`, :func:`inner_product_graph`, :func:`matmul_graph`,
  :func:`attention_forward_graph`, :func:`attention_dv_graph`, :func:`trivial_io_bound`);
  :mod:`.optimal` — the game's exact optimum on small graphs (:func:`optimal_io`,
  :class:`PebbleSearch`, :data:`MAX_VERTICES`) and a schedule replayed on the machine
  (:func:`replay_schedule`); :mod:`.attention_graphs` — the graph FlashAttention computes
  (:func:`attention_deferred_graph`) and its forward schedule as moves
  (:func:`flash_forward_moves`);
* :mod:`.blocks` — FlashAttention's working sets and block rules
  (:func:`flash_forward_working_set`, :func:`flash_forward_blocks`,
  :func:`flash_forward_min_M`, their backward twins, FlashAttention-1's :func:`fa1_blocks`),
  and the blocks a pass visits (:func:`flash_block_mask`, :func:`expand_block_mask`, the
  causal pattern);
* :mod:`.flash` — FlashAttention-2's schedules (:func:`flash_forward`,
  :func:`flash_backward`): one head or PyTorch's heads, dense, block-sparse or
  ``is_causal``, ``enable_gqa``; :mod:`.layout` — what a pass runs over;
* :mod:`.standard` — the materialising schedules (:func:`standard_forward`,
  :func:`standard_backward`);
* :mod:`.causal` — causal attention's mask and kept scores, and the constant its schedules
  save (:func:`causal_mask`, :func:`causal_saving`);
* :mod:`.smallcache` — SY24's square tiling for caches below d² (:func:`smallcache_forward`,
  :func:`smallcache_backward`, their tile rules); :mod:`.sweeps` — the counts swept over M
  and over kept blocks (:func:`cache_sizes`, :func:`smallcache_crossover`,
  :func:`smallcache_advantage`, :func:`bound_ratios`, :func:`block_sparse_sweep`);
* :mod:`.bounds` — the certified lower bounds (:func:`matmul_lower_bound`,
  :func:`forward_lower_bound`, :func:`backward_lower_bound`, :func:`sparse_lower_bound`)
  and the Θ-expressions with constant 1, never bounds (:func:`matmul_order`,
  :func:`matmul_sharp_order`, :func:`forward_order`, :func:`backward_order`,
  :func:`sparse_worst_case_order`); :mod:`.density` — what one part of a schedule holds
  (:func:`products_per_part`, :func:`mask_density_bound`); :mod:`.certify` — the counted
  schedules and exact optima every certified bound is held against; :mod:`.partition` and
  :mod:`.pebbling` — Hong and Kung's partition argument on a schedule
  (:func:`prune_schedule`, :func:`schedule_segments`, :func:`is_dominator`) and explicit
  pebble-game schedules (:func:`tiled_matmul_moves`, :func:`three_pebble_chain_moves`,
  :func:`loop_order_moves`, :func:`explicit_schedule`);
* :mod:`.gqa` — what grouped-query attention saves (:func:`gqa_kv_reuse`) and a decoding
  step's count;
* Chapter 10's hardware: :mod:`.intensity` (flops per word), :mod:`.roofline` (the roofline
  of the GPU presets of :mod:`attnlib.machines`) and :mod:`.hierarchy` (the L2 as a third
  level).
* Chapter 11's many devices: :mod:`.devices` — P devices that exchange counted messages
  (:class:`DeviceMachine`, :class:`DeviceCount`); :mod:`.shards` — how the rows are split
  among them (:func:`shard_rows`, :data:`LAYOUTS`) and the causal work each then has
  (:func:`causal_work`, :func:`kept_pairs`); the schedules, each with its closed-form
  twins: :mod:`.ring` (:func:`ring_forward`, :func:`ring_backward`), :mod:`.ulysses`
  (:func:`ulysses_forward`, :func:`ulysses_backward`) and :mod:`.grid`
  (:func:`grid_forward`, :func:`grid_backward`); :mod:`.comm_bounds` — the certified bound on
  the words of Q and K a device receives (:func:`device_comm_lower_bound`) and the closed forms
  of its regimes (:func:`busiest_comm_lower_bound`, :func:`comm_regime`).

Every ``*_count`` takes the sizes and the same keywords as its schedule (``m``, ``d_v``,
``is_causal``, ``enable_gqa`` with ``H`` and ``H_kv``, ``blocks``, ...). The names below are
those the chapters use; every module's ``__all__`` lists its own.
"""

from .attention_graphs import attention_deferred_graph, flash_forward_moves
from .blocks import (
    expand_block_mask,
    fa1_blocks,
    flash_backward_blocks,
    flash_backward_min_M,
    flash_backward_working_set,
    flash_block_mask,
    flash_forward_blocks,
    flash_forward_min_M,
    flash_forward_working_set,
)
from .bounds import (
    backward_lower_bound,
    backward_order,
    forward_lower_bound,
    forward_order,
    matmul_lower_bound,
    matmul_order,
    matmul_sharp_order,
    sparse_lower_bound,
    sparse_worst_case_order,
)
from .causal import causal_mask, causal_saving
from .certify import (
    Family,
    Worst,
    attack_bounds,
    default_sizes,
    element_mask,
    optimum_families,
    schedule_families,
    worst_ratios,
)
from .density import mask_density_bound, products_per_part
from .flash import flash_backward, flash_backward_count, flash_forward, flash_forward_count
from .gqa import gqa_kv_reuse
from .graphs import (
    ComputationGraph,
    attention_dv_graph,
    attention_forward_graph,
    inner_product_graph,
    matmul_graph,
    trivial_io_bound,
)
from .machine import CapacityError, IOCount, MachineError, TwoLevelMemory, words_by_array
from .matmul import (
    matmul_tile_size,
    naive_matmul,
    naive_matmul_count,
    tiled_matmul,
    tiled_matmul_count,
)
from .optimal import MAX_VERTICES, PebbleSearch, optimal_io, replay_schedule
from .partition import is_dominator, prune_schedule, schedule_segments
from .pebbling import (
    explicit_schedule,
    loop_order_moves,
    three_pebble_chain_moves,
    tiled_matmul_moves,
)
from .smallcache import (
    smallcache_backward,
    smallcache_backward_count,
    smallcache_backward_tile,
    smallcache_forward,
    smallcache_forward_count,
    smallcache_forward_tile,
)
from .standard import (
    standard_backward,
    standard_backward_count,
    standard_forward,
    standard_forward_count,
)
from .sweeps import (
    block_sparse_sweep,
    bound_ratios,
    cache_sizes,
    smallcache_advantage,
    smallcache_crossover,
)

__all__ = [
    # the machine and matrix multiplication (Chapter 2)
    "TwoLevelMemory",
    "IOCount",
    "CapacityError",
    "MachineError",
    "words_by_array",
    "naive_matmul",
    "naive_matmul_count",
    "tiled_matmul",
    "tiled_matmul_count",
    "matmul_tile_size",
    # the red-blue pebble game (Chapters 2 and 5)
    "ComputationGraph",
    "inner_product_graph",
    "matmul_graph",
    "attention_forward_graph",
    "attention_dv_graph",
    "attention_deferred_graph",
    "flash_forward_moves",
    "trivial_io_bound",
    "MAX_VERTICES",
    "optimal_io",
    "PebbleSearch",
    "replay_schedule",
    "prune_schedule",
    "schedule_segments",
    "is_dominator",
    "tiled_matmul_moves",
    "three_pebble_chain_moves",
    "loop_order_moves",
    "explicit_schedule",
    # FlashAttention and standard attention (Chapter 3)
    "flash_forward_blocks",
    "flash_backward_blocks",
    "flash_forward_working_set",
    "flash_backward_working_set",
    "flash_forward_min_M",
    "flash_backward_min_M",
    "fa1_blocks",
    "flash_block_mask",
    "expand_block_mask",
    "flash_forward",
    "flash_forward_count",
    "flash_backward",
    "flash_backward_count",
    "standard_forward",
    "standard_forward_count",
    "standard_backward",
    "standard_backward_count",
    "causal_mask",
    "causal_saving",
    # small caches and the sweeps over M (Chapter 4)
    "smallcache_forward",
    "smallcache_forward_count",
    "smallcache_backward",
    "smallcache_backward_count",
    "smallcache_forward_tile",
    "smallcache_backward_tile",
    "cache_sizes",
    "smallcache_crossover",
    "smallcache_advantage",
    # lower bounds (Chapter 5)
    "matmul_lower_bound",
    "forward_lower_bound",
    "backward_lower_bound",
    "sparse_lower_bound",
    "products_per_part",
    "mask_density_bound",
    "matmul_order",
    "matmul_sharp_order",
    "forward_order",
    "backward_order",
    "sparse_worst_case_order",
    "attack_bounds",
    "schedule_families",
    "optimum_families",
    "worst_ratios",
    "default_sizes",
    "element_mask",
    "Family",
    "Worst",
    "bound_ratios",
    "block_sparse_sweep",
    # grouped-query attention (Chapter 10)
    "gqa_kv_reuse",
]

# Chapter 10: the counts on real hardware (the roofline, and the L2 as a third level).
from . import hierarchy, intensity, roofline  # noqa: E402
from .hierarchy import *  # noqa: E402, F403
from .intensity import *  # noqa: E402, F403
from .roofline import *  # noqa: E402, F403

__all__ += intensity.__all__ + roofline.__all__ + hierarchy.__all__

# Chapter 11: attention across P devices (the machine, the layouts and three schedules).
from . import devices, grid, ring, ulysses  # noqa: E402
from .devices import *  # noqa: E402, F403
from .grid import *  # noqa: E402, F403
from .ring import *  # noqa: E402, F403
from .shards import LAYOUTS, causal_work, kept_pairs, shard_rows  # noqa: E402
from .ulysses import *  # noqa: E402, F403

__all__ += devices.__all__ + ["shard_rows", "causal_work", "kept_pairs", "LAYOUTS"]
__all__ += ring.__all__ + ulysses.__all__ + grid.__all__
from .comm_bounds import busiest_comm_lower_bound, comm_regime, device_comm_lower_bound  # noqa: E402

__all__ += ["device_comm_lower_bound", "busiest_comm_lower_bound", "comm_regime"]
