"""Detectors of the procedure: experiments (README commands, shell scripts, Makefiles, entry
points, notebooks), their parameters, seeds and bounds, the services and GPUs they need, the
data they read and fetch, and the outputs and metrics they write."""
