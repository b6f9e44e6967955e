"""The parts of `benchmarks/why_shed.py`: three scenarios, three ways of running calls through them."""
