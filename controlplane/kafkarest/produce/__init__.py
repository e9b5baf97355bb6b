"""REST produce: one engine for every path.

* ``engine`` -- records partitioned, encoded and sent as batches by the asyncio producer
  (``dataplane.client.producer.AsyncProducer``); its pool of producers, one per event loop.
* ``streaming`` -- the ASGI paths (API keys), on the server's event loop.
* ``services`` and ``loop`` -- the DRF views' paths (a console session), on one per-process loop thread.
"""
