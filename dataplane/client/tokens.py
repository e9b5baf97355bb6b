"""A static OAUTHBEARER token given as plain settings, turned into the ``oauth_cb`` librdkafka clients need.

Why: the Spark data source's options are strings that travel to executors, which cannot call back into the
control plane to mint tokens. A report's run gets one token minted for the run
(``controlplane.clusters.principals.spark_options``) as ``sasl.oauthbearer.token`` (with ``.expiry`` in epoch
seconds and ``.principal``); each client built from those settings hands it to librdkafka through ``oauth_cb``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

TOKEN = "sasl.oauthbearer.token"
EXPIRY = "sasl.oauthbearer.token.expiry"
PRINCIPAL = "sasl.oauthbearer.principal"


def with_static_token(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with the static-token settings replaced by an ``oauth_cb`` (unchanged when there are none)."""
    result = dict(config)
    token = result.pop(TOKEN, None)
    expiry = result.pop(EXPIRY, None)
    principal = result.pop(PRINCIPAL, None)
    if token is None:
        return result
    expires = float(expiry) if expiry is not None else time.time() + 3600
    name = str(principal or "")
    result.setdefault("sasl.mechanisms", "OAUTHBEARER")
    result["oauth_cb"] = lambda _config: (str(token), expires, name, {})
    return result
