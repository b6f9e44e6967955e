"""Persistent workflows: the tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) on a stateless fleet.

A `tools/call` that declares the extension may become a task: its record lives
in Redis (sealed with the fleet's key ring, bound to the creating principal),
its work runs in slices taken from a Redis Stream consumer group by whichever
worker is free, and every slice ends with a checkpoint. Any instance answers
`tasks/get`, `tasks/update` and `tasks/cancel`.

* `wire`: the extension's names and the task's wire views.
* `record`: a task record, its statuses and transitions, its stored layout.
* `sealing`: records sealed at rest with the key ring.
* `principal`: who owns a task.
* `store`: records, the per-principal cap and the slice queue in Redis.
* `jobs`, `demo_jobs`: what a task runs, step by step (the test packs' jobs live in `mrtr-test-packs`).
* `offer`: how a tool turns its call into a task.
* `service`: create, read, answer and cancel, as the methods need them.
* `leases`: a slice's lease, fenced by a token: begin, boundary check, commit (and the history stream).
* `presence`: heartbeats and named connections; dead workers' slices taken over at once.
* `runner`: takes slices from the queue and runs them.
* `extension`: the SDK extension (methods and the `tools/call` interceptor).
"""
