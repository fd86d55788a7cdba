"""Detectors of what the repository declares: dependency and project files (requirements
files, setup.py, setup.cfg, pyproject.toml, Pipfile, environment.yml, committed locks) and the
project's name, license and citation."""
