"""Reconcile: make a managed cluster what its spec and its resources say (see ``pipeline``).

Above ``clusters`` and ``resources`` (whose models it reads and whose spec it never writes), below nothing but
the entry points. Each step is a module: ``nodes``, ``credentials``, ``topics``, ``acls``, ``quotas``,
``secrets``, ``rebalance``; the pure deciders they call are the ``*_plan`` modules, tested as tables.
"""
