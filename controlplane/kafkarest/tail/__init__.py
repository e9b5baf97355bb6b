"""WebSocket live tail of a topic: ``/ws/clusters/{cluster_id}/topics/{topic}/tail``.

``cluster_id`` is the Kafka cluster id (``skc-…``), as in the v3 REST paths.

**Upgrade.** Authenticate with an ``Authorization`` header (HTTP Basic ``key_id:secret`` or
``Bearer key_id:secret``) or the console's session cookie; the viewer role suffices. A browser's
``Origin`` must be this site (the ``Host``) or listed in ``SLUICE_WS_ALLOWED_ORIGINS``; a client that
sends no ``Origin`` is not a browser and is allowed. Refusals are plain HTTP answers with a JSON body
``{"error_code", "message"}``: 401 (credentials), 403 (origin), 404 (unknown cluster, another tenant's
cluster, unknown topic), 503 (cluster unavailable).

**Client → server** (JSON text frames). First one ``subscribe`` (a connection silent for 30 s before it is closed)::

    {"type": "subscribe",
     "from": "latest" | "earliest" | {"offsets": {"0": 12, "1": 40}} | {"timestamp": 1700000000000}
             | {"last": 100},              # per partition; default "latest"
     "partitions": [0, 2],                 # optional subset; with "offsets", its keys are the subset
     "filter": "value_json.level == 'error'",   # optional JMESPath (see filters.py)
     "until": "end",                       # optional: stop at the end offsets seen now, then "done"
     "max_bytes_per_second": 65536}        # optional, at most the server's limit

Then at any time ``{"type": "ping", "id": any}`` (answered ``{"type": "pong", "id": …}``) or
``{"type": "stats"}`` (this process's counters for the topic). To resume after a dropped connection,
subscribe with ``"from": {"offsets": <the last cursor received>}``: no gap, no duplicate.

**Server → client**: ``subscribed`` (the partitions, the start ``cursor``, and ``end`` for a bounded
read); ``records`` (a batch of records and the ``cursor`` after them); ``progress`` (the cursor moved
but every record was filtered out; ``skipped`` counts them); ``done`` (a bounded read finished);
``error`` (``code``, ``message``, and the ``cursor`` when subscribed), followed by a close. The cursor
maps each subscribed partition (as a string) to the next offset it will show. A record is
``{"partition", "offset", "timestamp", "timestamp_type", "key", "key_encoding", "value",
"value_encoding", "headers": [{"key", "value", "encoding"}]}``; bytes are UTF-8 text when they decode,
else base64, and the ``*encoding`` fields say which.

**Close codes**: 1000 bounded read done; 4400 invalid message, subscribe or filter (``invalid_message``,
``invalid_subscribe``, ``invalid_filter``, ``already_subscribed``); 4401 ``credentials_revoked`` (the API key
the tail was opened with was revoked, its service account deleted, or the session's user removed from the
tenant: see ``kafkarest.revocation``); 4403 ``not_authorized`` (the cluster's ACLs refuse the principal); 4404
``partition_not_found`` or ``topic_not_found`` (deleted while tailing); 4408 ``subscribe_timeout``; 4429
``too_slow`` (the viewer fell a whole buffer, ``SLUICE_TAIL_BUFFER_BYTES``, behind); 4503
``kafka_unavailable``/``kafka_error``; 1011 ``internal_error``. Each viewer is sent at most
``SLUICE_TAIL_BYTES_PER_SECOND``; the server also sends WebSocket protocol pings (uvicorn's
``--ws-ping-interval``, 20 s) and drops a peer that does not answer them.

Modules: ``protocol`` (pure parsing and frames), ``records`` (rendering), ``filters`` (JMESPath),
``origin``, ``flow`` (buffer and rate limit), ``kafka`` (blocking librdkafka calls), ``fetcher`` (the
shared live fetcher), ``session`` (one subscription), ``app`` (the ASGI application), ``routing``.
"""
