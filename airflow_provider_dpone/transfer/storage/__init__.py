"""The durable stage and journal of the transfer on object storage (write-once objects)."""
