# Types of the compiled produce stream splitter (controlplane/kafkarest/_split.pyx).
from typing import Any

class ObjectSplitter:
    def split(self, data: bytes) -> tuple[list[Any], int, int]: ...

MAX_DEPTH: int

class NestingTooDeep(ValueError):
    def __init__(self) -> None: ...

def nesting_exceeds(data: bytes, limit: int) -> bool: ...
