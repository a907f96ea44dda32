"""The bridge logic, sans-I/O: inputs in, effects out, time passed in."""

__all__: list[str] = []
