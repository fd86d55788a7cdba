"""Detectors that derive from the files and from earlier findings: undeclared imports, the
Python version (declared files and syntax), CUDA (from the pinned frameworks) and system
libraries (from the Python packages and Dockerfiles)."""
