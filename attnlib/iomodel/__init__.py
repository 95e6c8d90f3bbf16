"""Part I of the book: I/O complexity on a two-level memory machine.

Every algorithm here runs on :class:`TwoLevelMemory`, which counts each word moved between a
fast memory of M words and the slow memory, and has a closed-form twin (``*_count``) that the
tests require to agree with the simulation exactly. Each module says what it holds;
:mod:`.roofline` and :mod:`.hierarchy` take the counts to real hardware (GPU presets, the
roofline, and a third memory level, the L2).
"""

from . import (
    blocks,
    bounds,
    causal,
    flash,
    gqa,
    graphs,
    intensity,
    machine,
    matmul,
    optimal,
    partition,
    pebbling,
    smallcache,
    standard,
    sweeps,
)
from .blocks import *  # noqa: F403
from .bounds import *  # noqa: F403
from .causal import *  # noqa: F403
from .flash import *  # noqa: F403
from .gqa import *  # noqa: F403
from .graphs import *  # noqa: F403
from .intensity import *  # noqa: F403
from .machine import *  # noqa: F403
from .matmul import *  # noqa: F403
from .optimal import *  # noqa: F403
from .partition import *  # noqa: F403
from .pebbling import *  # noqa: F403
from .smallcache import *  # noqa: F403
from .standard import *  # noqa: F403
from .sweeps import *  # noqa: F403

__all__ = (
    machine.__all__
    + matmul.__all__
    + blocks.__all__
    + flash.__all__
    + standard.__all__
    + smallcache.__all__
    + bounds.__all__
    + causal.__all__
    + gqa.__all__
    + intensity.__all__
    + sweeps.__all__
    + graphs.__all__
    + optimal.__all__
    + partition.__all__
    + pebbling.__all__
)

# The hardware modules build on the public names above, so they are imported last.
from . import hierarchy, roofline  # noqa: E402
from .hierarchy import *  # noqa: E402, F403
from .roofline import *  # noqa: E402, F403

__all__ += roofline.__all__ + hierarchy.__all__
