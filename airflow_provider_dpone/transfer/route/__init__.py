"""The native ClickHouse -> target transfer route: admission policy, extraction, durable stage, recovery.

One module per phase: ``selector``/``engine_admission``/``schema_admission``/``read_profile``/``window``/``physical``
decide admission on observations; ``admission`` freezes the profile and plan; ``extraction`` runs the one producer;
``journal``/``custody``/``states`` keep the durable record; ``recovery`` validates bindings; ``publication`` drives the
target; ``route`` ties the state machine together.
"""
