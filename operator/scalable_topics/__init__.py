"""Scalable topics: streaming topics whose hash-range segments split and merge at runtime."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scalable-topics")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
