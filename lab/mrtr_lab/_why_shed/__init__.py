"""The parts of `lab/mrtr_lab/why_shed.py`: three scenarios, three ways of running calls through them."""
