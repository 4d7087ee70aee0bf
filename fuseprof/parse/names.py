"""Short kernel names that agree across tools.

torch.profiler and ncu demangle differently ("{lambda()#3}" against "[lambda() (instance 3)]",
"at::native::" against "at::"), so full names from the two never match. The function's own
name, without return type, namespaces, template arguments and parameters, does.
"""

from __future__ import annotations

from functools import lru_cache

_ANONYMOUS = ("(anonymous namespace)::", "<unnamed>::")


@lru_cache(maxsize=2**16)  # a trace repeats a few hundred names tens of thousands of times
def short_kernel_name(name: str) -> str:
    """'void at::native::reduce_kernel<512, 1, ...>(...)' -> 'reduce_kernel'."""
    text = name.strip()
    for marker in _ANONYMOUS:
        text = text.replace(marker, "")
    if text.startswith("void "):
        text = text[len("void "):]
    cut = min((i for i in (text.find("<"), text.find("(")) if i >= 0), default=len(text))
    return text[:cut].rsplit("::", 1)[-1].strip() or name
