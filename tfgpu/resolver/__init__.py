"""The resolver: TensorFlow release x OS x driver x GPU x Python -> CUDA, cuDNN, packages, reasons.

Pure: it reads the tables in ``tfgpu/data`` and its two inputs, nothing else.
"""

from tfgpu.resolver.core import resolve
from tfgpu.resolver.model import Notice, Packages, Rejection, Resolution
from tfgpu.resolver.request import Request, make_request, request_for

__all__ = ["Notice", "Packages", "Rejection", "Request", "Resolution", "make_request", "request_for", "resolve"]
