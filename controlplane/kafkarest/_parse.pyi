# Types of the compiled produce record parser (controlplane/kafkarest/_parse.pyx).
from controlplane.kafkarest.records import ProduceRecord

def parse_plain(body: object) -> ProduceRecord | None: ...
