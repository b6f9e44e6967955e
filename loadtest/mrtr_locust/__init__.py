"""The MRTR Locust suite's library: expected answers, checks, custom statistics, users and the Locust hooks.

Imports only the MRTR client (`mrtr_client`) and the Locust stack, so the
`loadtest` image (which holds `client/mrtr_client` and `loadtest/` only) runs it.
"""
