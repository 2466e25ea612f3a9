"""tfgpu-install: get TensorFlow running on NVIDIA GPUs, and keep it running."""

__version__ = "0.1.0"
