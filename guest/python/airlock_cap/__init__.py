"""Airlock's guest library for programs running inside a sandbox.

For now this package holds only the capability wire codec (`airlock_cap.wire`,
docs/wire.md); the typed capability functions and error classes come with the
channel and broker.
"""
