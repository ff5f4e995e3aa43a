"""The version of mrtr-inspect (`mrtr_inspect.__version__`): its own module, so the modules that
write it (reports, recordings, exports) need not import the package's public API."""

__version__ = "0.1.0"
