"""The API tool handlers are written against: a round, its input requests and answers, capability checks."""
