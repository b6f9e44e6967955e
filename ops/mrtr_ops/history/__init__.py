"""Histories of a chaos run and their checker, after Jepsen's method: record every operation, then check it.

* `client_ops`: what the clients saw, one JSON line per event: each operation's
  invocation and its completion (ok, fail, or info when its effect is unknown).
* `store_events`: what the workers did to the task store, as Redis kept it: every
  slice begun (its fencing token) and every commit tried (its step range).
* `checker`: both against the model (a task reaches exactly one terminal state,
  every committed step range follows the last, every answer is the reference's)
  and the counts the report prints: lost, duplicated, wrong, redelivery times.
"""
