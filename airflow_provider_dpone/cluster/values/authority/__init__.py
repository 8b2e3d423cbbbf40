"""The versioned authority records of one operation, their phases and transitions, and their codec."""
