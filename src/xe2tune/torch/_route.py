"""Send a model's ``scaled_dot_product_attention`` calls to xe2tune's operator within a context."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from xe2tune._tuned import ConfigChoice
from xe2tune.torch._api import scaled_dot_product_attention

_SDPA = torch.nn.functional.scaled_dot_product_attention


class _RouteSdpa(TorchFunctionMode):
    """A torch function mode: it sees every call of a torch function, however it was imported
    (``F.scaled_dot_product_attention``, ``from torch.nn.functional import ...``)."""

    def __init__(self, fallback: bool, config: ConfigChoice) -> None:
        super().__init__()
        self.fallback = fallback
        self.config = config

    def __torch_function__(self, func: Callable[..., Any], types: Sequence[type],
                           args: Sequence[Any] = (),
                           kwargs: Mapping[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is _SDPA:
            return scaled_dot_product_attention(*args, **kwargs, fallback=self.fallback,
                                                config=self.config)
        return func(*args, **kwargs)


@contextmanager
def route_sdpa(*, fallback: bool = True, config: ConfigChoice = None) -> Iterator[None]:
    """Within the context, torch's scaled_dot_product_attention runs xe2tune's operator.

    ``fallback`` (default True: a model's masked or dropout calls keep working) sends the calls
    the operator does not support to torch's own implementation; False raises for them.
    ``config`` as :func:`scaled_dot_product_attention` takes it. Works in eager mode and under
    torch.compile (the mode is traced; the graph calls ``xe2tune::sdpa``).
    """
    with _RouteSdpa(fallback, config):
        yield
