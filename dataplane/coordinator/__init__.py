"""Consumer groups and committed offsets: the classic group protocol over ``__consumer_offsets``."""
