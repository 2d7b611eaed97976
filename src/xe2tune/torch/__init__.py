"""xe2tune's tuned kernels inside PyTorch (``pip install xe2tune[torch]``).

``scaled_dot_product_attention`` has torch's signature and runs the ``xe2tune::sdpa`` operator
(registered on import, with a fake implementation for torch.compile); ``route_sdpa`` sends a
model's own calls to it within a context.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401  (the core install is torch-free: say which extra brings it)
except ImportError as exc:
    raise ImportError("xe2tune.torch needs PyTorch: pip install 'xe2tune[torch]'") from exc

from xe2tune.torch._api import scaled_dot_product_attention
from xe2tune.torch._route import route_sdpa

__all__ = ["route_sdpa", "scaled_dot_product_attention"]
