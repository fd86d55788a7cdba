"""The static merge: findings become one manifest by stated rules (:mod:`.merge`).

The recovery agent that may refine it is :mod:`reprobridge.agent`.
"""
