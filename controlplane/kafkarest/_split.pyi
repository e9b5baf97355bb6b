# Types of the compiled produce stream splitter (controlplane/kafkarest/_split.pyx).
from typing import Any

class ObjectSplitter:
    def split(self, data: bytes) -> tuple[list[Any], int, int]: ...
