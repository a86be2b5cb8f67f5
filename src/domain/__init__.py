"""Pure policies that decide which evidence an agent gets and how it is described.

Standard library only: no I/O, no clock reads, no logging configuration.
"""
