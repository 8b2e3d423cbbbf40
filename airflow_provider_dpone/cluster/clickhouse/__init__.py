"""The cluster route's ports on clickhouse-connect; every statement rendered by a pure ``sql_*`` builder."""
